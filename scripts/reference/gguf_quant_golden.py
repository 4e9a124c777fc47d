#!/usr/bin/env python3
"""Writes models/gguf/testdata/quant/: float32 rows and what llama.cpp's quantisers make of them,
the goldens of TestQuantize_MatchesGGML and TestQuantize_MatchesGGUFPy.

  input.f32             32 rows × 256 float32 (little-endian), seeded numpy draws of the shapes
                        the quantisers branch on: N(0, 0.02²) weights, outliers ×40, one scale per
                        32-block, a zero row, a block under GROUP_MAX_EPS (1e-20), all-positive and
                        all-negative blocks, constant blocks, values at the rounding midpoints
  ggml.<type>           ggml_quantize_chunk(type, input, rows=32, n_per_row=256, imatrix=NULL) for
                        Q8_0, Q5_0, Q4_K, Q6_K and F16, BF16: libggml of llama-cpp-python 0.3.36 (the
                        reference quantize_row_<type>_ref that llama-quantize runs without --imatrix)
  manifest.json         the sha256 of each file, and of gguf.quants.quantize(input, type) of gguf-py
                        0.19.0 for Q8_0, Q5_0, F16, BF16 (the quantiser convert_hf_to_gguf.py
                        --outtype q8_0 runs), "gguf-py.<type>": equal to ggml's here, so not stored

Usage (from the repository root; the venv of scripts/reference/requirements-llama.txt):
  .venv-llama/bin/python scripts/reference/gguf_quant_golden.py
Deterministic: rerunning rewrites every file byte for byte.
"""
import ctypes
import glob
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

OUT = Path("models/gguf/testdata/quant")
ROWS, N = 32, 256
GGML_TYPES = {"F16": 1, "Q5_0": 6, "Q8_0": 8, "Q4_K": 12, "Q6_K": 14, "BF16": 30}
GGUF_PY_TYPES = ["F16", "BF16", "Q8_0", "Q5_0"]


def rows():
    rng = np.random.default_rng(31)
    x = rng.normal(0, 0.02, size=(ROWS, N)).astype(np.float32)
    x[1] *= np.where(rng.random(N) < 0.02, 40, 1).astype(np.float32)  # outliers
    x[2] *= np.repeat(rng.uniform(0.01, 3, N // 32), 32).astype(np.float32)  # one scale per 32-block
    x[3] = 0  # a zero row
    x[4, :32] = 1e-20  # under GROUP_MAX_EPS
    x[4, 32:64] = np.abs(x[4, 32:64]) + 0.5  # all positive (Q4_K's min > 0 path)
    x[4, 64:96] = -np.abs(x[4, 64:96]) - 0.5  # all negative
    x[4, 96:128] = 0.25  # constant
    x[5] = rng.uniform(-1, 1, N).astype(np.float32)
    x[6] = (np.arange(N) % 16 - 7.5).astype(np.float32) / 7.5  # rounding midpoints
    x[7] = rng.standard_t(2, N).astype(np.float32)  # heavy tails
    x[8:16] = rng.normal(0, 1, size=(8, N)).astype(np.float32)
    x[16:] = rng.normal(0, 0.05, size=(ROWS - 16, N)).astype(np.float32) * rng.uniform(0.1, 10, (ROWS - 16, 1)).astype(np.float32)
    return np.ascontiguousarray(x)


def libggml():
    import llama_cpp
    d = Path(llama_cpp.__file__).parent / "lib"
    for name in ("libggml-base.so", "libggml.so"):
        for p in sorted(glob.glob(str(d / name))):
            lib = ctypes.CDLL(p)
            if hasattr(lib, "ggml_quantize_chunk"):
                return lib, p
    sys.exit(f"no libggml with ggml_quantize_chunk under {d}")


def main():
    from importlib.metadata import version
    import gguf
    x = rows()
    OUT.mkdir(parents=True, exist_ok=True)
    files = {"input.f32": x.tobytes()}
    lib, path = libggml()
    lib.ggml_quantize_chunk.restype = ctypes.c_size_t
    lib.ggml_quantize_chunk.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                        ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    lib.ggml_row_size.restype = ctypes.c_size_t
    lib.ggml_row_size.argtypes = [ctypes.c_int, ctypes.c_int64]
    for name, t in GGML_TYPES.items():
        lib.ggml_quantize_init(t)
        dst = ctypes.create_string_buffer(lib.ggml_row_size(t, N) * ROWS)
        n = lib.ggml_quantize_chunk(t, x.ctypes.data, dst, 0, ROWS, N, None)
        files[f"ggml.{name}"] = dst.raw[:n]
    hashes = {k: hashlib.sha256(v).hexdigest() for k, v in files.items()}
    for name in GGUF_PY_TYPES:
        q = gguf.quants.quantize(x, gguf.GGMLQuantizationType[name])
        hashes[f"gguf-py.{name}"] = hashlib.sha256(np.ascontiguousarray(q).tobytes()).hexdigest()
    manifest = {"generator": "scripts/reference/gguf_quant_golden.py", "rows": ROWS, "n_per_row": N,
                "llama-cpp-python": version("llama-cpp-python"), "gguf-py": version("gguf"),
                "libggml": os.path.basename(path),
                "sha256": dict(sorted(hashes.items()))}
    for k, v in files.items():
        (OUT / k).write_bytes(v)
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    print(f"wrote {len(files)} files to {OUT}")


if __name__ == "__main__":
    main()
