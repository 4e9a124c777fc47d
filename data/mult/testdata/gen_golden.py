"""Regenerate the golden rows: the course's make_pairs (extras/trl_dpo.py) and make_dataset
(extras/trl_grpo.py), copied verbatim, written as JSONL (Dataset.from_list rows).

    cd data/mult/testdata && python3 gen_golden.py   # CPython 3.x random (stable since 3.2)
"""
import json
import random


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


def write(name, rows):
    with open(name, 'w') as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + '\n')


write('course_dpo_seed0.jsonl', make_pairs(512, 0))
write('course_dpo_seed7.jsonl', make_pairs(40, 7))
write('course_grpo_seed0.jsonl', make_dataset(512, 0))
write('course_grpo_seed7.jsonl', make_dataset(40, 7))
