"""The tokenizer and chat-template goldens of data/tokenizer and data/chat, from HuggingFace itself.

Every output field of these files comes from the pinned reference venv (scripts/reference/
requirements.txt): HuggingFace `tokenizers` (the Python wheel, Tokenizer.from_str on the committed
tokenizer.json) and transformers' AutoTokenizer and apply_chat_template on the committed
tokenizer.json + tokenizer_config.json. The inputs (texts, id sequences, conversations) are the
files' own: the texts and id sequences were drawn by the Go tests' generators (fuzzInputs,
familyInputs, familyExtras) and are read back from the files, the conversations from
data/chat/testdata/convs*.json.

    .venv-reference/trl-0.24/bin/python scripts/reference/tokenizer_goldens.py          # rewrite
    .venv-reference/trl-0.24/bin/python scripts/reference/tokenizer_goldens.py --check  # exit 1 on any difference
    .venv-reference/trl-1/bin/python scripts/reference/tokenizer_goldens.py --check     # what transformers 5 changes

Fields (per text): ids = Tokenizer.encode(text, add_special_tokens=False); ids_plain = the same
with the file's "added_tokens" emptied; ids_special = AutoTokenizer's default encode
(tokenizer(text)["input_ids"], add_special_tokens=True: the post-processor's BOS for Llama 3 and
Gemma 3); decoded = Tokenizer.decode(ids, skip_special_tokens=False); ids_qwen25 (golden.json)
where Qwen2.5's added tokens (the Qwen3 file without ids 151665-151668) give other ids. Per id
sequence: decoded / decoded_skip = Tokenizer.decode(ids, skip_special_tokens=False/True), and
decoded_text = AutoTokenizer.decode(ids, skip_special_tokens=True) where it differs from
decoded_skip (clean_up_tokenization_spaces: Llama 3). The script also requires, for every text,
that AutoTokenizer's encode with add_special_tokens=False equals ids and that Tokenizer.encode with
add_special_tokens=True equals ids_special, and fails naming the first text where either differs.

Chat templates: rendered = apply_chat_template(messages, tools=..., add_generation_prompt=...,
tokenize=False) and ids = apply_chat_template(..., tokenize=True), with add_generation_prompt True
and False; a template's exception is recorded as error (its message).
"""
import argparse
import copy
import gzip
import io
import json
import os
import sys
import tempfile

import tokenizers
import transformers
from tokenizers import Tokenizer
from transformers import AutoTokenizer

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOK = os.path.join(ROOT, "data", "tokenizer", "testdata")
CHAT = os.path.join(ROOT, "data", "chat", "testdata")
COMMAND = ".venv-reference/trl-0.24/bin/python scripts/reference/tokenizer_goldens.py"
ORACLE = f"HuggingFace tokenizers {tokenizers.__version__} (Python) and transformers {transformers.__version__} AutoTokenizer"

# SmolLM2's pipeline (HuggingFaceTB/SmolLM2-*'s tokenizer.json) on Llama 3's vocabulary and merges:
# the same overrides as data/tokenizer/family_test.go's smollm2-pipeline family.
SMOLLM2_OVERRIDE = {
    "normalizer": None,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
}
QWEN25_FIRST_MISSING = 151665  # Qwen2.5 lacks Qwen3's added tokens 151665-151668


def read_maybe_gzip(path):
    with open(path, "rb") as f:
        data = f.read()
    return gzip.decompress(data) if path.endswith(".gz") else data


def dumps(v):
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


class Family:
    """One tokenizer.json (with overrides) and, where it has one, its tokenizer_config.json."""

    def __init__(self, name, tokenizer_json, config=None, override=None, drop_added_from=None, chat_template=None):
        doc = json.loads(read_maybe_gzip(tokenizer_json))
        for k, v in (override or {}).items():
            doc[k] = v
        if drop_added_from is not None:
            doc["added_tokens"] = [a for a in doc["added_tokens"] if a["id"] < drop_added_from]
        self.name = name
        self.doc = doc
        self.raw = Tokenizer.from_str(json.dumps(doc))
        plain = copy.deepcopy(doc)
        plain["added_tokens"] = []
        self.plain = Tokenizer.from_str(json.dumps(plain))
        self.tmp = tempfile.TemporaryDirectory()
        with open(os.path.join(self.tmp.name, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
        cfg = {"tokenizer_class": "PreTrainedTokenizerFast"}  # no tokenizer_config.json: the file as is
        if config is not None:
            with open(config, encoding="utf-8") as f:
                cfg = json.load(f)
            if chat_template is not None:
                cfg["chat_template"] = chat_template
            if drop_added_from is not None and "added_tokens_decoder" in cfg:
                cfg["added_tokens_decoder"] = {k: v for k, v in cfg["added_tokens_decoder"].items() if int(k) < drop_added_from}
        with open(os.path.join(self.tmp.name, "tokenizer_config.json"), "w", encoding="utf-8") as f:
            json.dump(cfg, f, ensure_ascii=False)
        self.auto = AutoTokenizer.from_pretrained(self.tmp.name)

    def encode(self, text):
        """ids, ids_plain, ids_special for text; checks the two libraries agree."""
        ids = self.raw.encode(text, add_special_tokens=False).ids
        auto_plain = self.auto(text, add_special_tokens=False)["input_ids"]
        special = self.auto(text)["input_ids"]
        raw_special = self.raw.encode(text, add_special_tokens=True).ids
        if auto_plain != ids:
            sys.exit(f"{self.name}: {text!r}: AutoTokenizer(add_special_tokens=False) {auto_plain} != tokenizers {ids}")
        if raw_special != special:
            sys.exit(f"{self.name}: {text!r}: AutoTokenizer's default encode {special} != tokenizers add_special_tokens=True {raw_special}")
        return ids, self.plain.encode(text, add_special_tokens=False).ids, special

    def case(self, c):
        ids, plain, special = self.encode(c["text"])
        out = {k: c[k] for k in ("cat", "text") if k in c}
        out.update(ids=ids, ids_plain=plain, ids_special=special, decoded=self.raw.decode(ids, skip_special_tokens=False))
        return out

    def decode(self, d):
        ids = d["ids"]
        out = {"ids": ids, "decoded": self.raw.decode(ids, skip_special_tokens=False),
               "decoded_skip": self.raw.decode(ids, skip_special_tokens=True)}
        text = self.auto.decode(ids, skip_special_tokens=True)
        if text != out["decoded_skip"]:
            out["decoded_text"] = text
        return out


def family_golden(path, fam, meta):
    """A testdata/<family>/golden.json.gz: cases, fuzz texts and id sequences."""
    old = json.loads(read_maybe_gzip(path))
    new = {"meta": meta,
           "cases": [fam.case(c) for c in old["cases"]],
           "fuzz": [fam.case(c) for c in old["fuzz"]],
           "decode": [fam.decode(d) for d in old["decode"]]}
    return gzip_bytes(dumps(new) + "\n")


def entries_json(entries):
    """A list of objects, one key per line and each value compact (ids stay on one line)."""
    items = []
    for e in entries:
        items.append(" {\n" + ",\n".join(f"  {dumps(k)}: {dumps(v)}" for k, v in e.items()) + "\n }")
    return ("[\n" + ",\n".join(items) + "\n]\n").encode("utf-8")


def gzip_bytes(s):
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9, mtime=0) as z:
        z.write(s.encode("utf-8"))
    return buf.getvalue()


def qwen_golden(qwen3, qwen25):
    """testdata/golden.json: one case per line, as the file has always been laid out."""
    path = os.path.join(TOK, "golden.json")
    old = json.loads(read_maybe_gzip(path))
    meta = dict(old["meta"])
    meta["generator"] = COMMAND
    meta["oracle"] = ORACLE + " on testdata/tokenizer.json.gz (ids_qwen25: the same file without the added tokens 151665-151668)"
    cases = []
    for c in old["cases"]:
        ids, plain, special = qwen3.encode(c["text"])
        out = {"cat": c["cat"], "text": c["text"], "ids": ids, "ids_plain": plain, "ids_special": special,
               "decoded": qwen3.raw.decode(ids, skip_special_tokens=False)}
        ids25, _, _ = qwen25.encode(c["text"])
        if ids25 != ids:
            out["ids_qwen25"] = ids25
        cases.append(out)
    head = dumps({"meta": meta})[:-1] + ',"cases":['
    return (head + ",\n".join(dumps(c) for c in cases) + "]}\n").encode("utf-8")


def qwen_fuzz(qwen3):
    path = os.path.join(TOK, "hf_fuzz.json.gz")
    old = json.loads(read_maybe_gzip(path))
    meta = {"generator": COMMAND + " (texts and id sequences: fuzzInputs seed 0, kept from the file)",
            "oracle": ORACLE + " on testdata/tokenizer.json.gz"}
    encs = []
    for e in old["encode"]:
        ids, plain, special = qwen3.encode(e["text"])
        encs.append({"text": e["text"], "ids": ids, "ids_plain": plain, "ids_special": special})
    decs = []
    for d in old["decode"]:
        x = qwen3.decode(d)
        decs.append(x)
    return gzip_bytes(dumps({"meta": meta, "encode": encs, "decode": decs}) + "\n")


def render(fam, messages, tools, gen):
    kw = {"tools": tools} if tools else {}
    try:
        text = fam.auto.apply_chat_template(messages, add_generation_prompt=gen, tokenize=False, **kw)
        ids = fam.auto.apply_chat_template(messages, add_generation_prompt=gen, tokenize=True, return_dict=False, **kw)
    except Exception as e:  # the template's raise_exception: jinja2's TemplateError
        if type(e).__name__ != "TemplateError":
            raise
        return {"rendered": None, "ids": None, "error": str(e)}
    if not isinstance(ids, list) or ids and not isinstance(ids[0], int):
        sys.exit(f"{fam.name}: apply_chat_template(tokenize=True) returned {type(ids)}")
    if fam.auto(text, add_special_tokens=False)["input_ids"] != ids:
        sys.exit(f"{fam.name}: apply_chat_template's ids are not the encode of its text")
    return {"rendered": text, "ids": ids, "error": None}


def qwen_chat(fam, convs_file):
    with open(os.path.join(CHAT, convs_file), encoding="utf-8") as f:
        convs = json.load(f)
    out = []
    for c in convs:
        g = render(fam, c["messages"], c.get("tools"), True)
        n = render(fam, c["messages"], c.get("tools"), False)
        if g["error"] or n["error"]:
            sys.exit(f"{fam.name}/{c['name']}: {g['error'] or n['error']}")
        out.append({"name": c["name"], "rendered": g["rendered"], "ids": g["ids"],
                    "rendered_no_generation_prompt": n["rendered"], "ids_no_generation_prompt": n["ids"]})
    return entries_json(out)


def families_chat(fams):
    with open(os.path.join(CHAT, "convs_families.json"), encoding="utf-8") as f:
        convs = json.load(f)
    out = []
    for fam in fams:
        for c in convs:
            for gen in (True, False):
                r = render(fam, c["messages"], None, gen)
                out.append({"family": fam.name, "name": c["name"], "add_generation_prompt": gen, **r})
    return entries_json(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed files; write nothing; exit 1 on a difference")
    args = ap.parse_args()

    qwen_json = os.path.join(TOK, "tokenizer.json.gz")
    qwen_cfg = os.path.join(TOK, "tokenizer_config.json")
    with open(os.path.join(CHAT, "qwen25_chat_template.jinja"), encoding="utf-8") as f:
        qwen25_template = f.read()
    qwen3 = Family("qwen3", qwen_json, qwen_cfg)
    qwen25 = Family("qwen25", qwen_json, qwen_cfg, drop_added_from=QWEN25_FIRST_MISSING, chat_template=qwen25_template)
    llama3 = Family("llama3", os.path.join(TOK, "llama3", "tokenizer.json.gz"), os.path.join(TOK, "llama3", "tokenizer_config.json"))
    gemma3 = Family("gemma3", os.path.join(TOK, "gemma3", "tokenizer.json.gz"), os.path.join(TOK, "gemma3", "tokenizer_config.json"))
    smollm2 = Family("smollm2-pipeline", os.path.join(TOK, "llama3", "tokenizer.json.gz"), override=SMOLLM2_OVERRIDE)

    def fmeta(fam, src):
        return {"cases": "480 texts: golden.json's (cat qwen-*) and familyExtras (family_oracle_test.go)",
                "generator": COMMAND + " (texts and id sequences: familyInputs seed 0, kept from the file)",
                "oracle": ORACLE + " on " + src}

    files = {
        os.path.join(TOK, "golden.json"): lambda: qwen_golden(qwen3, qwen25),
        os.path.join(TOK, "hf_fuzz.json.gz"): lambda: qwen_fuzz(qwen3),
        os.path.join(TOK, "llama3", "golden.json.gz"): lambda: family_golden(
            os.path.join(TOK, "llama3", "golden.json.gz"), llama3, fmeta(llama3, "testdata/llama3/tokenizer.json.gz and tokenizer_config.json")),
        os.path.join(TOK, "gemma3", "golden.json.gz"): lambda: family_golden(
            os.path.join(TOK, "gemma3", "golden.json.gz"), gemma3, fmeta(gemma3, "testdata/gemma3/tokenizer.json.gz and tokenizer_config.json")),
        os.path.join(TOK, "smollm2_pipeline.json.gz"): lambda: family_golden(
            os.path.join(TOK, "smollm2_pipeline.json.gz"), smollm2,
            fmeta(smollm2, "testdata/llama3/tokenizer.json.gz with normalizer, pre_tokenizer, post_processor and decoder replaced by SmolLM2's (AutoTokenizer: tokenizer_class PreTrainedTokenizerFast, nothing else)")),
        os.path.join(CHAT, "hf_qwen25.json"): lambda: qwen_chat(qwen25, "convs.json"),
        os.path.join(CHAT, "hf_qwen25_tools.json"): lambda: qwen_chat(qwen25, "convs_tools.json"),
        os.path.join(CHAT, "hf_qwen3.json"): lambda: qwen_chat(qwen3, "convs.json"),
        os.path.join(CHAT, "hf_qwen3_tools.json"): lambda: qwen_chat(qwen3, "convs_tools.json"),
        os.path.join(CHAT, "hf_families.json"): lambda: families_chat([llama3, gemma3]),
    }
    differ = 0
    for path, make in files.items():
        data = make()
        rel = os.path.relpath(path, ROOT)
        with open(path, "rb") as f:
            old = f.read()
        if args.check:
            same = read_maybe_gzip(path) == (gzip.decompress(data) if path.endswith(".gz") else data)
            if not same:
                differ += 1
                print(f"DIFFERS {rel}")
                describe(path, old, data)
            else:
                print(f"same    {rel}")
            continue
        if old != data:
            with open(path, "wb") as f:
                f.write(data)
            print(f"wrote   {rel}")
        else:
            print(f"same    {rel}")
    print(f"{ORACLE}: {len(files) - differ} of {len(files)} files as committed")
    sys.exit(1 if differ else 0)


def describe(path, old, new):
    """Prints the first differing items of a golden file (the --check report)."""
    a = json.loads(read_maybe_gzip(path) if old is None else (gzip.decompress(old) if path.endswith(".gz") else old))
    b = json.loads(gzip.decompress(new) if path.endswith(".gz") else new)
    shown = [0]

    def walk(x, y, where):
        if shown[0] >= 8:
            return
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if k == "meta":
                    continue
                walk(x.get(k), y.get(k), f"{where}.{k}")
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y) and not all(isinstance(v, int) for v in x):
            for i, (u, v) in enumerate(zip(x, y)):
                walk(u, v, f"{where}[{i}]")
        elif x != y:
            shown[0] += 1
            print(f"  {where}: committed {str(x)[:160]}\n  {' ' * len(where)}  now      {str(y)[:160]}")

    walk(a, b, "")
    count = [0]

    def n(x, y):
        if isinstance(x, dict) and isinstance(y, dict):
            for k in set(x) | set(y):
                if k != "meta":
                    n(x.get(k), y.get(k))
        elif isinstance(x, list) and isinstance(y, list) and len(x) == len(y) and not all(isinstance(v, int) for v in x):
            for u, v in zip(x, y):
                n(u, v)
        elif x != y:
            count[0] += 1

    n(a, b)
    print(f"  {count[0]} values differ")


if __name__ == "__main__":
    main()
