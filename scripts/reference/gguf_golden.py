#!/usr/bin/env python3
"""Writes models/gguf/testdata/{types.gguf,expected.f32,expected.json}: the dequantisation goldens of
package gguf, from llama.cpp's own Python package gguf (gguf-py, pinned below).

types.gguf holds one tensor per ggml type the Go package dequantises and metadata of every value
type (nested arrays too), written by gguf.GGUFWriter with general.alignment 64:
  - F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: a seeded normal array quantised by gguf.quants.
  - Q4_K, Q5_K, Q6_K: gguf-py 0.19.0 has no quantiser for these, so each block is seeded random
    bytes with its f16 scales (d, dmin) overwritten by finite values; the dequantiser sees every
    bit pattern of the quants and 6-bit scales.
expected.f32 is, per tensor in file order, gguf.quants.dequantize of the bytes gguf.GGUFReader
reads back, as little-endian float32; expected.json lists each tensor's name, type, ne, element
offset and count, sha256 of its float32 bytes, its first values (as Python writes them), and the metadata as written.

Usage (see models/gguf/testdata/README.md):
  python3 -m venv .venv-gguf && .venv-gguf/bin/pip install gguf==0.19.0
  .venv-gguf/bin/python scripts/reference/gguf_golden.py models/gguf/testdata
"""
import hashlib
import json
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T, GGUFValueType as V
from gguf.quants import quantize, dequantize

GGUF_PY_VERSION = "0.19.0"
SEED = 31

METADATA = [  # key, value, type, array sub-type
    ("test.u8", 200, V.UINT8, None),
    ("test.i8", -100, V.INT8, None),
    ("test.u16", 60000, V.UINT16, None),
    ("test.i16", -30000, V.INT16, None),
    ("test.u32", 4000000000, V.UINT32, None),
    ("test.i32", -2000000000, V.INT32, None),
    ("test.f32", 0.15625, V.FLOAT32, None),
    ("test.bool", True, V.BOOL, None),
    ("test.string", "héllo ▁wörld", V.STRING, None),
    ("test.u64", 18000000000000000000, V.UINT64, None),
    ("test.i64", -9000000000000000000, V.INT64, None),
    ("test.f64", -2.5e-300, V.FLOAT64, None),
    ("test.array_i32", [1, -2, 3], V.ARRAY, V.INT32),
    ("test.array_string", ["a", "", "ccc"], V.ARRAY, V.STRING),
    ("test.array_nested", [["x", "y"], ["z"]], V.ARRAY, V.ARRAY),
]


def k_quant_blocks(rng, qtype, rows, cols):
    """Random bytes for rows×cols elements of a K-quant, with finite f16 d (and dmin)."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // block
    raw = rng.integers(0, 256, size=(nb, size), dtype=np.uint8)
    scales = (rng.random((nb, 2)) * 0.01 + 1e-4).astype(np.float16).view(np.uint8)
    if qtype == T.Q6_K:  # {ql[128], qh[64], scales[16], d}: d is last
        raw[:, size - 2:] = scales[:, :2]
    else:  # Q4_K, Q5_K: {d, dmin, ...}
        raw[:, :4] = scales
    return raw.reshape(rows, cols // block * size)


def main(out):
    rng = np.random.default_rng(SEED)
    w = gguf.GGUFWriter(os.path.join(out, "types.gguf"), arch="test")
    w.add_custom_alignment(64)
    for key, val, vtype, sub in METADATA:
        w.add_key_value(key, val, vtype, sub)
    rows, cols = 2, 512
    for qtype in (T.F32, T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        if qtype == T.F16:  # subnormals, signed zero, infinities and the largest finite f16
            x[0, :6] = [6e-8, -3e-6, -0.0, np.inf, -np.inf, 65504]
        q = quantize(x, qtype)
        w.add_tensor(f"t.{qtype.name}", q, raw_dtype=None if qtype in (T.F32, T.F16) else qtype)
    for qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        w.add_tensor(f"t.{qtype.name}", k_quant_blocks(rng, qtype, rows, cols), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    r = gguf.GGUFReader(os.path.join(out, "types.gguf"))
    tensors, chunks, offset = [], [], 0
    for t in r.tensors:
        y = np.ascontiguousarray(dequantize(np.asarray(t.data), t.tensor_type), dtype="<f4").reshape(-1)
        b = y.tobytes()
        tensors.append({"name": t.name, "type": t.tensor_type.name, "ne": [int(n) for n in t.shape],
                        "offset": offset, "count": int(y.size), "sha256": hashlib.sha256(b).hexdigest(),
                        "first": [repr(float(v)) for v in y[:4]]})
        chunks.append(b)
        offset += y.size
    with open(os.path.join(out, "expected.f32"), "wb") as f:
        f.write(b"".join(chunks))
    meta = [{"key": k, "type": vt.name, "sub_type": st.name if st else None, "value": v}
            for k, v, vt, st in METADATA]
    doc = {"generator": "scripts/reference/gguf_golden.py", "gguf_py": GGUF_PY_VERSION,
           "numpy": np.__version__, "seed": SEED, "alignment": 64, "tensors": tensors, "metadata": meta}
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    from importlib.metadata import version
    if version("gguf") != GGUF_PY_VERSION:
        sys.exit(f"gguf {version('gguf')} is installed; this script pins gguf=={GGUF_PY_VERSION}")
    main(sys.argv[1] if len(sys.argv) > 1 else "models/gguf/testdata")
