#!/usr/bin/env python3
"""Dataset files as the Hub and `datasets` write them, and what `datasets.load_dataset` returns
for them: the golden of data's TestReadDatasets_EqualsLoadDataset.

Small copies (a few rows each, text of their own) of the TRL quick starts' dataset shapes,
written by datasets 5.x / pyarrow in the pinned `.venv-reference/trl-0.24`:

  capybara/      trl-lib/Capybara's schema (source, messages) in the Hub's layout: README.md
                 configs, data/train-00000-of-00001.parquet and data/test-….parquet
  ultrafeedback/ trl-lib/ultrafeedback_binarized's (chosen, rejected message lists, scores): split-named
                 parquet files with no README (datasets' default split patterns)
  tldr/          trl-lib/tldr's (prompt, completion): tldr.jsonl, tldr.csv, tldr.parquet, tldr.jsonl.gz
  kto/           trl-lib/kto-mix-14k's (prompt, completion message lists, label): save_to_disk of a DatasetDict
  deepmath/      trl-lib/DeepMath-103K's (prompt messages, solution, a number): save_to_disk of a Dataset
  tools/         tool-calling SFT rows (messages with tool_calls, a tools column of JSON schemas) and a
                 second config ("plain") in README.md configs

expected.json holds, per query (path, config, split), the rows load_dataset returns, as JSON;
tools_rendered.json the tools rows as transformers renders them for TRL's SFTTrainer
(apply_chat_template(messages, tools=example["tools"]): render_jinja_template with Qwen2.5's
template, data/chat/testdata/qwen25_chat_template.jinja).

Regenerate (from the repository root):

    .venv-reference/trl-0.24/bin/python scripts/reference/dataset_files.py
"""
import gzip
import argparse
import json
import os
import shutil

import datasets
import pyarrow
from datasets import Dataset, DatasetDict, load_dataset

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(REPO, "data", "testdata", "datasets")


def msgs(*pairs):
    return [{"role": r, "content": c} for r, c in pairs]


CAPY = [
    {"source": "Airoboros", "messages": msgs(("user", "Name a prime."), ("assistant", "7"))},
    {"source": "Know-Logic", "messages": msgs(("user", "Two words?"), ("assistant", "Yes, two."), ("user", "Three?"), ("assistant", "Yes, three words."))},
    {"source": "GPT4LLM", "messages": msgs(("user", "Ünïcode ✓ and \"quotes\"\nnew line"), ("assistant", "ok"))},
]
CAPY_TEST = [{"source": "Dove", "messages": msgs(("user", "Hi"), ("assistant", "Hello"))}]
UF = [
    {"chosen": msgs(("user", "2+2?"), ("assistant", "4")), "rejected": msgs(("user", "2+2?"), ("assistant", "5")), "score_chosen": 9.0, "score_rejected": 2.5},
    {"chosen": msgs(("user", "Capital of France?"), ("assistant", "Paris")), "rejected": msgs(("user", "Capital of France?"), ("assistant", "Lyon")), "score_chosen": 8.0, "score_rejected": 1.0},
]
UF_TEST = [{"chosen": msgs(("user", "1+1?"), ("assistant", "2")), "rejected": msgs(("user", "1+1?"), ("assistant", "3")), "score_chosen": 7.0, "score_rejected": 3.0}]
TLDR = [
    {"prompt": "SUBREDDIT: r/cats\nPOST: my cat sleeps all day", "completion": " Cat sleeps a lot."},
    {"prompt": "SUBREDDIT: r/go\nPOST: generics, finally", "completion": " Go has generics, with a comma, and \"quotes\"."},
    {"prompt": "SUBREDDIT: r/none\nPOST: None", "completion": " None"},
]
KTO = [
    {"prompt": msgs(("user", "Say hi")), "completion": msgs(("assistant", "hi")), "label": True},
    {"prompt": msgs(("user", "Say hi")), "completion": msgs(("assistant", "go away")), "label": False},
    {"prompt": msgs(("user", "Count to 2")), "completion": msgs(("assistant", "1, 2")), "label": True},
]
MATH = [
    {"prompt": msgs(("user", "What is 6*7?")), "solution": "42", "difficulty": 1.5},
    {"prompt": msgs(("user", "Simplify 2/4.")), "solution": "\\frac{1}{2}", "difficulty": 2.0},
    {"prompt": msgs(("user", "Solve x+1=3.")), "solution": "2", "difficulty": None},
]
WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city."}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {"name": "get_time", "description": "The time now.",
        "parameters": {"type": "object", "properties": {}, "required": []}}}
TOOLS = [
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
                  {"role": "tool", "content": "sunny", "name": "get_weather"},
                  {"role": "assistant", "content": "It is sunny in Paris."}],
     "tools": [WEATHER, TIME]},
    {"messages": [{"role": "user", "content": "What time is it?"},
                  {"role": "assistant", "content": None, "tool_calls": [{"type": "function", "function": {"name": "get_time", "arguments": {}}}]},
                  {"role": "tool", "content": "12:00", "name": "get_time"},
                  {"role": "assistant", "content": "Noon."}],
     "tools": [TIME]},
]
PLAIN = [{"messages": msgs(("user", "No tools here."), ("assistant", "Right."))}]


def main():
    global OUT
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=REPO, help="tree to write into (default: the repository)")
    OUT = os.path.join(ap.parse_args().out, "data", "testdata", "datasets")
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)

    def at(*p):
        path = os.path.join(OUT, *p)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    # capybara: the Hub's layout, as push_to_hub writes it
    Dataset.from_list(CAPY).to_parquet(at("capybara", "data", "train-00000-of-00001.parquet"))
    Dataset.from_list(CAPY_TEST).to_parquet(at("capybara", "data", "test-00000-of-00001.parquet"))
    with open(at("capybara", "README.md"), "w") as f:
        f.write("---\nconfigs:\n- config_name: default\n"
                "  data_files:\n  - split: train\n    path: data/train-*\n  - split: test\n    path: data/test-*\n---\n\n# Capybara (a copy of its shape)\n")
    # ultrafeedback: split-named files, no README
    Dataset.from_list(UF).to_parquet(at("ultrafeedback", "train.parquet"))
    Dataset.from_list(UF_TEST).to_parquet(at("ultrafeedback", "test.parquet"))
    # tldr: one file per format
    tl = Dataset.from_list(TLDR)
    tl.to_json(at("tldr", "tldr.jsonl"))
    tl.to_csv(at("tldr", "tldr.csv"), index=False)
    tl.to_parquet(at("tldr", "tldr.parquet"))
    with open(at("tldr", "tldr.jsonl"), "rb") as f, open(at("tldr", "tldr.jsonl.gz"), "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as g:
            g.write(f.read())
    # kto: save_to_disk of a DatasetDict; deepmath: of a Dataset
    DatasetDict({"train": Dataset.from_list(KTO), "test": Dataset.from_list(KTO[:1])}).save_to_disk(at("kto", "x")[:-2])
    Dataset.from_list(MATH).save_to_disk(at("deepmath", "x")[:-2])
    # tools: two configs
    Dataset.from_list(TOOLS).to_parquet(at("tools", "tools", "train-00000-of-00001.parquet"))
    Dataset.from_list(PLAIN).to_parquet(at("tools", "plain", "train-00000-of-00001.parquet"))
    with open(at("tools", "README.md"), "w") as f:
        f.write("---\nconfigs:\n- config_name: tools\n  default: true\n  data_files: tools/train-*\n"
                "- config_name: plain\n  data_files:\n  - split: train\n    path: plain/*.parquet\n---\n")

    queries = [
        ("capybara", None, "train"), ("capybara", None, "test"), ("capybara", None, "train[1:]"),
        ("ultrafeedback", None, "train"), ("ultrafeedback", None, "test"),
        ("tldr/tldr.jsonl", None, "train"), ("tldr/tldr.csv", None, "train"), ("tldr/tldr.parquet", None, "train"),
        ("tldr/tldr.jsonl.gz", None, "train"), ("tldr/tldr.parquet", None, "train[:2]"), ("tldr/tldr.parquet", None, "train[-1:]"),
        ("tldr/tldr.parquet", None, "train[:50%]"),
        ("kto", None, "train"), ("kto", None, "test"), ("kto", None, "train+test"),
        ("deepmath", None, "train"),
        ("tools", None, "train"), ("tools", "plain", "train"),
    ]
    expected = []
    for path, config, split in queries:
        full = os.path.join(OUT, path)
        if os.path.isdir(full) and (os.path.exists(os.path.join(full, "state.json")) or os.path.exists(os.path.join(full, "dataset_dict.json"))):
            d = datasets.load_from_disk(full)
            if isinstance(d, DatasetDict):
                parts = [p for p in split.split("+")]
                d = datasets.concatenate_datasets([d[p] for p in parts])
            rows = list(d)
        elif os.path.isdir(full):
            rows = list(load_dataset(full, name=config, split=split))
        else:
            ext = full.removesuffix(".gz").rsplit(".", 1)[1]
            builder = {"jsonl": "json"}.get(ext, ext)
            rows = list(load_dataset(builder, data_files=full, split=split))
        expected.append({"path": path, "config": config or "", "split": split, "rows": rows})
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump({"generator": "scripts/reference/dataset_files.py",
                   "versions": {"datasets": datasets.__version__, "pyarrow": pyarrow.__version__},
                   "queries": expected}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    from transformers.utils.chat_template_utils import render_jinja_template
    with open(os.path.join(REPO, "data", "chat", "testdata", "qwen25_chat_template.jinja")) as f:
        template = f.read()
    tools_rows = list(load_dataset(os.path.join(OUT, "tools"), split="train"))
    rendered = []
    for row in tools_rows:
        out, _ = render_jinja_template(conversations=[row["messages"]], tools=row["tools"], chat_template=template,
                                       eos_token="<|im_end|>", pad_token="<|endoftext|>")
        rendered.append(out[0])
    with open(os.path.join(OUT, "tools_rendered.json"), "w") as f:
        json.dump({"generator": "scripts/reference/dataset_files.py", "template": "data/chat/testdata/qwen25_chat_template.jinja",
                   "rendered": rendered}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    # load_dataset leaves its cache files beside local directories' data: not part of the tree
    for root, dirs, _ in os.walk(OUT):
        for d in dirs:
            if d.startswith(".") or d == "cache":
                shutil.rmtree(os.path.join(root, d), ignore_errors=True)


if __name__ == "__main__":
    main()
