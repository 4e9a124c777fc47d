"""TRL 1.16's reading of Llama 3.1 tool calls, for posttrain's Llama 3.x tool-call format
(data/tools, trainers/grpo): models/encode/testdata/llama3_tools/{chat_template.jinja,golden.json};
and of Qwen2.5's <tool_call> blocks: data/tools/testdata/qwen25_parse.json.

In the trl-1 venv (transformers 5.24.0):

  .venv-reference/trl-1/bin/python scripts/reference/llama3_tools.py [--out TREE]

The tokenizer is data/tokenizer/testdata/llama3's (Llama 3.1's tokenizer.json and
tokenizer_config.json) with TRL's own copy of Llama 3.1-Instruct's chat template
(trl/chat_templates/llama3_1.jinja, which add_response_schema recognises), written beside the
golden. The golden holds:

- parse: assistant texts (each tokenized with <|eot_id|> appended, as a sampled completion ends)
  and what trl.chat_template_utils.parse_response makes of them after add_response_schema, as
  GRPOTrainer's tool loop calls it (prefix: the prompt's ids; tools: the calculator and a
  weather tool with typed parameters, whose string arguments transformers casts by the schema):
  the tool calls it finds, or none;
- suffix: the token ids GRPOTrainer._get_tool_suffix_ids gives for tool messages (the tool turn
  and the next assistant header), for one and two results;
- prompt: a conversation rendered with tools=[calculator's schema] and add_generation_prompt, its
  text and ids (apply_chat_template).

qwen25_parse.json holds the same parse of Qwen2.5 turns (QWEN_TEXTS), on Qwen's tokenizer
(data/tokenizer/testdata) with Qwen2.5-Instruct's template (data/chat/testdata).
"""

import argparse
import gzip
import json
import os
import shutil
import tempfile
import types

import trl
from transformers import AutoTokenizer
from trl.chat_template_utils import add_response_schema, parse_response
from trl.trainer.grpo_trainer import GRPOTrainer

REPO = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": "Evaluates an arithmetic expression and returns the result.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "The expression, e.g. 12*(3+4)."}},
            "required": ["expression"],
        },
    },
}

WEATHER = {
    "type": "function",
    "function": {
        "name": "weather",
        "description": "The forecast.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "celsius": {"type": "boolean"},
                "lat": {"type": "number"},
                "hours": {"type": "array", "items": {"type": "integer"}},
                "note": {"type": ["integer", "null"]},
            },
            "required": ["city"],
        },
    },
}

TEXTS = [
    '{"name": "calculator", "parameters": {"expression": "4780*3328"}}',
    '{"name":"calculator","parameters":{"expression":"2+2"}}',
    '{"name": "calculator", "parameters": {"expression": "1/0", "precision": 3}}',
    '{"name": "lookup", "parameters": {"key": "a \\"quoted\\" {brace}"}}',
    '{"name": "calculator", "parameters": {}}',
    "The answer is 15907840.",
    'Sure. {"name": "calculator", "parameters": {"expression": "2+2"}}',
    '{"name": "calculator", "arguments": {"expression": "2+2"}}',
    '{"name": "calculator", "parameters": {"expression": }',
    '{"name": "calculator", "parameters": {"expression": "1+1"}}{"name": "calculator", "parameters": {"expression": "2+2"}}',
    '{"name": "calculator", "parameters": "2+2"}',
    "",
]


QWEN_TEXTS = [
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "48213*9127"}}\n</tool_call>',
    'Let me compute.\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>',
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}\n</tool_call>\nThe answer',
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}}\n</tool_call>\n<tool_call>\n{"name": "weather", "arguments": {"city": "Paris", "days": 3}}\n</tool_call>',
    '<tool_call>\n{not json}\n</tool_call>',
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1"}}\n</tool_call>\n<tool_call>\n{bad}\n</tool_call>',
    '<tool_call>\n{"arguments": {}}\n</tool_call>',
    '<tool_call>\n{"name": "calculator"}\n</tool_call>',
    '<tool_call>\n{"name": "calculator", "arguments": "2+2"}\n</tool_call>',
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+2"}}',
    'The answer is 42.',
    '<tool_call>{"name": "calculator", "arguments": {"expression": "3*3"}}</tool_call>',
    '<tool_call>\n{"name": "weather", "arguments": {"city": "7", "days": "3", "celsius": "true", "lat": "48.85"}}\n</tool_call>',
    '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo", "days": "3.0", "celsius": "0", "lat": "2", "note": "null"}}\n</tool_call>',
    '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo", "days": "three", "celsius": "yes", "lat": "nan", "hours": "[1, 2]"}}\n</tool_call>',
    '<tool_call>\n{"name": "weather", "arguments": {"city": "Oslo", "days": " -4 ", "lat": "1e3", "note": "5", "extra": "9"}}\n</tool_call>',
]


def tokenizer_dir(d, fixture, template):
    with gzip.open(os.path.join(fixture, "tokenizer.json.gz"), "rb") as src, open(os.path.join(d, "tokenizer.json"), "wb") as dst:
        shutil.copyfileobj(src, dst)
    cfg = json.load(open(os.path.join(fixture, "tokenizer_config.json")))
    cfg["chat_template"] = template
    json.dump(cfg, open(os.path.join(d, "tokenizer_config.json"), "w"))
    return add_response_schema(AutoTokenizer.from_pretrained(d))


def parse_all(tok, texts, eos, conv):
    prompt_ids = tok.apply_chat_template(conv, tools=[CALCULATOR, WEATHER], add_generation_prompt=True, tokenize=True, return_dict=False)
    out = []
    for text in texts:  # as GRPOTrainer's tool loop parses a completion: after its prompt, with the tools
        ids = tok(text, add_special_tokens=False)["input_ids"] + [tok.convert_tokens_to_ids(eos)]
        parsed = parse_response(tok, ids, prefix=prompt_ids, tools=[CALCULATOR, WEATHER])
        calls = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in parsed.get("tool_calls") or []]
        out.append({"text": text, "tool_calls": calls, "content": parsed.get("content", "")})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=REPO)
    args = ap.parse_args()
    out = os.path.join(args.out, "models", "encode", "testdata", "llama3_tools")
    os.makedirs(out, exist_ok=True)
    template_src = os.path.join(os.path.dirname(trl.__file__), "chat_templates", "llama3_1.jinja")
    shutil.copyfile(template_src, os.path.join(out, "chat_template.jinja"))
    template = open(template_src, encoding="utf-8").read()

    conv = [{"role": "system", "content": "calc"}, {"role": "user", "content": "4780*3328"}]
    with tempfile.TemporaryDirectory() as d:
        tok = tokenizer_dir(d, os.path.join(REPO, "data", "tokenizer", "testdata", "llama3"), template)
    prompt_text = tok.apply_chat_template(conv, tools=[CALCULATOR], add_generation_prompt=True, tokenize=False)
    prompt_ids = tok.apply_chat_template(conv, tools=[CALCULATOR], add_generation_prompt=True, tokenize=True, return_dict=False)
    parse = parse_all(tok, TEXTS, "<|eot_id|>", conv)

    fake = types.SimpleNamespace(processing_class=tok, _tokenizer=tok, chat_template=None, chat_template_kwargs={}, _is_vlm=False)
    suffix = []
    for msgs in (
        [{"role": "tool", "name": "calculator", "content": "15907840"}],
        [{"role": "tool", "name": "calculator", "content": "15907840"}, {"role": "tool", "name": "calculator", "content": "{'error': 'division by zero'}"}],
    ):
        suffix.append({"messages": msgs, "ids": GRPOTrainer._get_tool_suffix_ids(fake, msgs)})

    golden = {
        "trl": trl.__version__,
        "parse": parse,
        "suffix": suffix,
        "prompt": {"messages": conv, "tools": [CALCULATOR], "text": prompt_text, "ids": prompt_ids},
    }
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump(golden, f, indent=1, ensure_ascii=False)
        f.write("\n")

    qwen_template = open(os.path.join(REPO, "data", "chat", "testdata", "qwen25_chat_template.jinja"), encoding="utf-8").read()
    with tempfile.TemporaryDirectory() as d:
        qtok = tokenizer_dir(d, os.path.join(REPO, "data", "tokenizer", "testdata"), qwen_template)
    qdir = os.path.join(args.out, "data", "tools", "testdata")
    os.makedirs(qdir, exist_ok=True)
    with open(os.path.join(qdir, "qwen25_parse.json"), "w") as f:
        json.dump({"trl": trl.__version__, "tools": [CALCULATOR, WEATHER], "parse": parse_all(qtok, QWEN_TEXTS, "<|im_end|>", conv)}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
