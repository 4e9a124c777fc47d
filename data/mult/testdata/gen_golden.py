"""Regenerate the golden rows: the course's make_pairs (extras/trl_dpo.py) and make_dataset
(extras/trl_grpo.py), copied verbatim, written as JSONL (Dataset.from_list rows); and the outputs of
trl_grpo.py's verifier, copied verbatim, on tricky completions (verifier_golden.jsonl).

    cd data/mult/testdata && python3 gen_golden.py   # CPython 3.x random (stable since 3.2)
"""
import json
import random
import re


def make_pairs(n=512, seed=0):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(2, 19), rng.randint(2, 19)
        wrong = a * b + rng.choice([-a, -b, b, a, 1, -1])            # 그럴듯한 오답
        rows.append({'prompt': [{'role': 'user', 'content': f'{a}×{b}는 얼마인가요? 숫자 하나로만 답하세요.'}],
                     'chosen': [{'role': 'assistant', 'content': str(a * b)}],
                     'rejected': [{'role': 'assistant', 'content': str(wrong)}]})
    return rows


def make_dataset(n=512, seed=0):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(2, 19), rng.randint(2, 19)
        rows.append({'prompt': [{'role': 'user', 'content': f'{a}×{b}는 얼마인가요? 숫자 하나로만 답하세요.'}],
                     'answer': str(a * b)})
    return rows


def verifier(completions, answer, **kwargs):
    """검증기 보상 (식 11.1의 r_i): 응답의 첫 정수가 정답이면 1, 아니면 0."""
    rewards = []
    for completion, gold in zip(completions, answer):
        text = completion[0]['content'] if isinstance(completion, list) else completion
        m = re.search(r'-?\d+', text)
        rewards.append(1.0 if m and m.group() == gold else 0.0)
    return rewards


# (completion, answer): signs, trailing text, several integers, empty, leading zeros, and Python's
# Unicode \d (full-width, Arabic-Indic and Devanagari digits are Nd; superscripts are not).
VERIFIER_CASES = [
    ('12', '12'), (' 12\n', '12'), ('-12', '12'), ('-12', '-12'), ('--12', '-12'), ('- 12', '12'),
    ('12abc', '12'), ('a12b13', '12'), ('a12b13', '13'), ('', '12'), ('   ', '12'),
    ('012', '12'), ('012', '012'), ('12.5', '12'), ('1,200', '1200'), ('3×4=12', '12'),
    ('답은 12입니다.', '12'), ('１２', '12'), ('１２', '１２'), ('١٢ 12', '12'), ('१२', '१२'),
    ('²12', '12'), ('x-0', '-0'), ('12\n13', '13'), ('<|im_end|>12', '12'),
]


def write(name, rows):
    with open(name, 'w') as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + '\n')


write('course_dpo_seed0.jsonl', make_pairs(512, 0))
write('course_dpo_seed7.jsonl', make_pairs(40, 7))
write('course_grpo_seed0.jsonl', make_dataset(512, 0))
write('course_grpo_seed7.jsonl', make_dataset(40, 7))
write('verifier_golden.jsonl', [
    {'completion': c, 'answer': g, 'reward': verifier([[{'role': 'assistant', 'content': c}]], [g])[0]}
    for c, g in VERIFIER_CASES])
