#!/usr/bin/env python3
"""Writes models/gguf/testdata/export/convert_hf_to_gguf.json: what llama.cpp's own converter,
convert_hf_to_gguf.py (the llama.cpp vendored in llama-cpp-python 0.3.36, with its gguf-py), writes
for the tiny checkpoints of models/testdata at --outtype f16, bf16 and q8_0. For each file: every
metadata entry (key, gguf type, sha256 of its encoded key · type · value bytes, and the value when
it is a scalar or a string under 200 characters) and every tensor (name, ggml type, ne, sha256 of
its data). TestExport_MatchesLlamaCppConverter exports the same checkpoints with posttrain and
compares entry for entry.

Each fixture directory gets models/tinymodel's tokenizer (as the Go tests give it), in a
temporary directory. Two things of the converter are set from here, neither of which changes what
it writes for a recognised tokenizer:
  - get_vocab_base_pre: it names the pre-tokenizer by the sha256 of a test string's ids, and the
    cut-down tokenizer's hash is registered nowhere; it is told "qwen2" (what its pipeline is);
  - the sentencepiece module, which it imports before looking for tokenizer.model, is a stub: no
    fixture has one, so it falls back to the byte-level BPE path as for any tokenizer.json model.

Usage (from the repository root; needs torch and transformers, e.g. the trl-0.24 venv, and the
llama.cpp source of the pinned sdist):
  pip download --no-deps llama-cpp-python==0.3.36 -d /tmp/lcp     # an sdist only
  tar -xzf /tmp/lcp/llama_cpp_python-0.3.36.tar.gz -C /tmp/lcp
  .venv-reference/trl-0.24/bin/python scripts/reference/gguf_convert_golden.py \\
      --llama-cpp /tmp/lcp/llama_cpp_python-0.3.36/vendor/llama.cpp
Deterministic: rerunning rewrites the file byte for byte.
"""
import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FIXTURES = ["qwen2-tiny", "qwen3-tiny", "llama-tiny", "smollm2-tiny", "gemma3-bf16-tiny"]
TYPES = ["f16", "bf16", "q8_0"]
OUT = "models/gguf/testdata/export/convert_hf_to_gguf.json"

# Runs convert_hf_to_gguf.py in a child process with the two settings of the doc string.
WRAPPER = r'''
import importlib.machinery, runpy, sys, types
from pathlib import Path
llama_cpp = Path(sys.argv[1])
sys.path[:0] = [str(llama_cpp), str(llama_cpp / "gguf-py")]
sp = types.ModuleType("sentencepiece")
sp.__spec__ = importlib.machinery.ModuleSpec("sentencepiece", None)
sp.SentencePieceProcessor = None
sys.modules["sentencepiece"] = sp
import conversion.base as base
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
sys.argv = [str(llama_cpp / "convert_hf_to_gguf.py")] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''


def digest(path, gguf):
    r = gguf.GGUFReader(path)
    kvs = []
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        raw = b"".join(bytes(p) for p in f.parts)
        e = {"key": f.name, "type": f.types[0].name, "sha256": hashlib.sha256(raw).hexdigest()}
        if f.types[0] != gguf.GGUFValueType.ARRAY:
            v = f.contents()
            if not isinstance(v, str) or len(v) < 200:
                e["value"] = v
        kvs.append(e)
    tensors = [{"name": t.name, "type": t.tensor_type.name, "ne": [int(n) for n in t.shape],
                "sha256": hashlib.sha256(bytes(t.data)).hexdigest()} for t in r.tensors]
    return {"metadata": kvs, "tensors": tensors}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source (llama-cpp-python 0.3.36's vendor/llama.cpp)")
    ap.add_argument("--out", default=".", help="tree to write the golden into (default: the repository)")
    args = ap.parse_args()
    sys.path[:0] = [str(Path(args.llama_cpp) / "gguf-py")]
    import gguf
    tok = Path("models/tinymodel/files")
    out = {"generator": "scripts/reference/gguf_convert_golden.py",
           "converter": "convert_hf_to_gguf.py and gguf-py of llama-cpp-python 0.3.36's vendor/llama.cpp",
           "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        wrapper = Path(tmp) / "wrap.py"
        wrapper.write_text(WRAPPER)
        for fx in FIXTURES:
            src = Path(tmp) / fx
            shutil.copytree(f"models/testdata/{fx}/model", src)
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(tok / name, src / name)
            for typ in TYPES:
                path = Path(tmp) / f"{fx}.{typ}.gguf"
                env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
                subprocess.run([sys.executable, str(wrapper), args.llama_cpp, str(src), "--outtype", typ,
                                "--outfile", str(path)], check=True, env=env, capture_output=True)
                out["files"][f"{fx}.{typ}"] = digest(str(path), gguf)
    dst = Path(args.out) / OUT
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
