#!/usr/bin/env python3
"""llama.cpp itself on what `posttrain export gguf` writes: writes
models/gguf/testdata/export/llamacpp_logprobs.json, the golden of TestExport_LlamaCppLogProbs.

For each tiny checkpoint of models/testdata that GGUF can carry (with models/tinymodel's
tokenizer) and each of --type f16, q8_0, q4_k_m, the script runs `posttrain export gguf`, loads
the file with llama-cpp-python 0.3.36 (llama_cpp.Llama(logits_all=True), CPU, one thread),
evaluates one fixed batch of 16 token ids and takes the log-softmax of every position's logits
(float64) at the next token: llama.cpp's per-token log-probs. It records them with the sha256 of
the file they came from, and the largest difference from `posttrain score` on the original
checkpoint (float32) and on the GGUF itself (`posttrain score --model FILE.gguf`, which converts
it; not for llama-tiny, whose Llama 3 rope_freqs the importer cannot invert).

It also runs llama-quantize (llama_cpp.llama_model_quantize, LLAMA_FTYPE_MOSTLY_Q4_K_M) on each f16
export and compares it tensor by tensor with `posttrain export gguf --type q4_k_m` of the f16
file's own weights (`posttrain convert` of it): the same ggml type and the same bytes for every
tensor. With --real DIR (a checkpoint directory, e.g. `posttrain convert` of
SmolLM2-135M-Instruct.Q4_1.gguf) it does all of this once on that model and prints the figures
(docs/gguf.md) without writing them into the golden.

Usage (from the repository root; the venv of scripts/reference/requirements-llama.txt, see
README.md):
  go build -o /tmp/posttrain ./cmd/posttrain
  .venv-llama/bin/python scripts/reference/gguf_export_check.py --posttrain /tmp/posttrain
  .venv-llama/bin/python scripts/reference/gguf_export_check.py --posttrain /tmp/posttrain --real DIR
"""
import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

FIXTURES = ["qwen2-tiny", "qwen3-tiny", "llama-tiny", "smollm2-tiny", "gemma3-bf16-tiny"]
TYPES = ["f16", "q8_0", "q4_k_m"]
TOKENS = [5, 17, 301, 42, 7, 99, 500, 3, 250, 11, 77, 400, 123, 64, 2, 300]
OUT = Path("models/gguf/testdata/export/llamacpp_logprobs.json")


def run(*cmd):
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True).stdout


def llama_logprobs(path, tokens):
    import llama_cpp
    llm = llama_cpp.Llama(model_path=str(path), logits_all=True, n_ctx=max(64, len(tokens)), n_batch=len(tokens),
                          n_threads=1, n_threads_batch=1, verbose=False)
    llm.eval(tokens)
    logits = np.array(llm.scores[: len(tokens)], dtype=np.float64)
    lse = np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1)) + logits.max(-1)
    return [float(logits[i - 1, tokens[i]] - lse[i - 1]) for i in range(1, len(tokens))]


def posttrain_logprobs(bin_, model, tokens, tmp):
    batch = Path(tmp) / "batch.json"
    batch.write_text(json.dumps({"input_ids": [tokens], "completion_start": 1}))
    out = json.loads(run(bin_, "score", "--model", model, "--input", batch))
    return out["token_logprobs"][0]


def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def quantize_q4_k_m(src, dst):
    import llama_cpp
    p = llama_cpp.llama_model_quantize_default_params()
    p.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M
    p.nthread = 1
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), p) != 0:
        sys.exit(f"llama_model_quantize failed on {src}")


def same_tensors(a, b):
    """(tensors compared, differences) between two GGUFs' tensors: type and bytes."""
    import gguf
    ta = {t.name: t for t in gguf.GGUFReader(a).tensors}
    tb = {t.name: t for t in gguf.GGUFReader(b).tensors}
    diffs = sorted(set(ta) ^ set(tb))
    for name in sorted(set(ta) & set(tb)):
        x, y = ta[name], tb[name]
        if x.tensor_type != y.tensor_type or bytes(x.data) != bytes(y.data):
            diffs.append(f"{name}: {x.tensor_type.name} vs {y.tensor_type.name}")
    return len(ta), diffs


SENTENCE = "The capital of France is Paris. It is known for the Eiffel Tower and the Louvre."


def check_model(bin_, name, model, tmp, importable=True, tokens=None):
    res = {}
    for typ in TYPES:
        path = Path(tmp) / f"{name}.{typ}.gguf"
        run(bin_, "export", "gguf", "--model", model, "--out", path, "--type", typ)
    if tokens is None:  # a real model: a sentence, tokenised by llama.cpp from the f16 export, with the bos it adds
        import llama_cpp
        llm = llama_cpp.Llama(model_path=str(Path(tmp) / f"{name}.f16.gguf"), vocab_only=True, verbose=False)
        tokens = llm.tokenize(SENTENCE.encode(), add_bos=True, special=False)  # the bos the model asks for (Gemma)
        print(f"{name}: {len(tokens)} tokens {tokens}")
    ref = posttrain_logprobs(bin_, model, tokens, tmp)
    for typ in TYPES:
        path = Path(tmp) / f"{name}.{typ}.gguf"
        lp = llama_logprobs(path, tokens)
        r = {"gguf_sha256": sha256(path), "llamacpp_logprobs": lp,
             "max_abs_vs_posttrain": max(abs(a - b) for a, b in zip(lp, ref))}
        if importable:
            own = posttrain_logprobs(bin_, path, tokens, tmp)
            r["max_abs_vs_posttrain_gguf"] = max(abs(a - b) for a, b in zip(lp, own))
        res[typ] = r
        print(f"{name} {typ}: llama.cpp vs posttrain (original) {r['max_abs_vs_posttrain']:.3g}" +
              (f", vs posttrain on the GGUF {r['max_abs_vs_posttrain_gguf']:.3g}" if importable else ""))
    if importable:
        f16 = Path(tmp) / f"{name}.f16.gguf"
        lq = Path(tmp) / f"{name}.llama-quantize.q4_k_m.gguf"
        quantize_q4_k_m(f16, lq)
        back = Path(tmp) / f"{name}.f16-weights"
        run(bin_, "convert", f16, "--out", back)
        pq = Path(tmp) / f"{name}.f16-weights.q4_k_m.gguf"
        run(bin_, "export", "gguf", "--model", back, "--out", pq, "--type", "q4_k_m")
        n, diffs = same_tensors(lq, pq)
        res["llama_quantize"] = {"tensors": n, "differing": diffs}
        print(f"{name} llama-quantize Q4_K_M of the f16 export vs posttrain's q4_k_m: {n - len(diffs)}/{n} tensors equal" +
              (f" (differ: {diffs[:5]})" if diffs else ""))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--posttrain", required=True, help="a built posttrain binary")
    ap.add_argument("--real", help="also check this checkpoint directory (printed, not written)")
    ap.add_argument("--out", default=".", help="tree to write the golden into (default: the repository)")
    args = ap.parse_args()
    from importlib.metadata import version
    with tempfile.TemporaryDirectory() as tmp:
        if args.real:
            check_model(args.posttrain, Path(args.real).name, args.real, tmp)
            return
        golden = {"generator": "scripts/reference/gguf_export_check.py", "llama-cpp-python": version("llama-cpp-python"),
                  "tokens": TOKENS, "files": {}}
        for fx in FIXTURES:
            src = Path(tmp) / fx
            shutil.copytree(f"models/testdata/{fx}/model", src)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(Path("models/tinymodel/files") / f, src / f)
            golden["files"][fx] = check_model(args.posttrain, fx, src, tmp, importable=fx != "llama-tiny", tokens=TOKENS)
    dst = Path(args.out) / OUT
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"wrote {dst}")


if __name__ == "__main__":
    main()
