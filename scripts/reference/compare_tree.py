#!/usr/bin/env python3
"""`make reference-check`'s comparison of a regenerated golden with the committed one.

    python3 scripts/reference/compare_tree.py NEW OLD

NEW and OLD are two files or two directories (compared file by file: a file in one and not in the
other fails). Files with the same bytes agree. Otherwise a .json file agrees when it has the same
structure and the same strings, integers and booleans, and every float is within float32 rounding
of the committed one: |new − old| ≤ REL × max(|new|, |old|, and for an item of a list of numbers
the list's largest |value|) (float32 sums of many terms: a logit near 0 among others of order 1,
a tensor's gradient sum), or ≤ SCALE_REL × the file's largest |value| (a value that
cancels to about 0, such as the sum of a tied LM head's gradient, whose bits are noise). A .safetensors file agrees when it
has the same tensors (names, dtypes, shapes, metadata) and each tensor's values agree by the same
rule, the tensor's largest |value| as the scale. Any other file must have the same bytes.

Why not bytes alone: torch's CPU kernels pick their vectorisation by the CPU they run on, so the
pinned venvs give the last bits of a float32 (and of float64 sums) differently on another machine
(measured 2026-12-02 against goldens written on another machine: see the summary line this prints) while every string, id and shape is the same. Run to run on one machine every file is
byte-identical (checked). Prints the largest float differences; exits 1 on any disagreement.
"""
import json
import math
import os
import sys

REL = 1e-5
SCALE_REL = 1e-9


class Diff(Exception):
    pass


def floats_agree(a, b, scale, near, where, worst):
    if math.isnan(a) or math.isnan(b):
        if not (math.isnan(a) and math.isnan(b)):
            raise Diff(f"{where}: {a} vs {b}")
        return
    d = abs(a - b)
    if d == 0:
        return
    size = max(abs(a), abs(b), near)
    rel = d / size
    worst[0] = max(worst[0], min(rel, d / scale if scale else math.inf))
    if not (d <= REL * size or d <= SCALE_REL * scale):
        raise Diff(f"{where}: {a!r} vs {b!r} ({d:.3g} apart, {rel:.2g} relative)")


def max_abs(x):
    if isinstance(x, dict):
        return max((max_abs(v) for v in x.values()), default=0.0)
    if isinstance(x, list):
        return max((max_abs(v) for v in x), default=0.0)
    if isinstance(x, float) and not math.isnan(x) and not math.isinf(x):
        return abs(x)
    return 0.0


def json_agree(a, b, scale, where, worst, near=0.0):
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))) or isinstance(a, bool) or isinstance(b, bool):
            raise Diff(f"{where}: {a!r} vs {b!r}")
        floats_agree(float(a), float(b), scale, near, where, worst)
    elif isinstance(a, dict) and isinstance(b, dict):
        if sorted(a) != sorted(b):
            raise Diff(f"{where}: keys {sorted(set(a) ^ set(b))} in one only")
        for k in a:
            json_agree(a[k], b[k], scale, f"{where}/{k}", worst)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            raise Diff(f"{where}: {len(a)} vs {len(b)} items")
        flat = all(not isinstance(x, (list, dict)) for x in a)
        near = max(max_abs(a), max_abs(b)) if flat else 0.0  # the size of a value's neighbours
        for i, (x, y) in enumerate(zip(a, b)):
            json_agree(x, y, scale, f"{where}[{i}]", worst, near)
    elif a != b or type(a) is not type(b):
        raise Diff(f"{where}: {a!r} vs {b!r}")


def safetensors_agree(new, old, worst):
    import numpy as np
    from safetensors.numpy import load_file
    from safetensors import safe_open
    with safe_open(new, "np") as f, safe_open(old, "np") as g:
        if f.metadata() != g.metadata():
            raise Diff("metadata differs")
    a, b = load_file(new), load_file(old)
    if sorted(a) != sorted(b):
        raise Diff(f"tensors {sorted(set(a) ^ set(b))} in one only")
    for k in a:
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            raise Diff(f"{k}: {x.dtype}{list(x.shape)} vs {y.dtype}{list(y.shape)}")
        if not np.issubdtype(x.dtype, np.floating):
            if not np.array_equal(x, y):
                raise Diff(f"{k}: values differ")
            continue
        x64, y64 = x.astype(np.float64).ravel(), y.astype(np.float64).ravel()
        scale = float(np.max(np.abs(y64))) if y64.size else 0.0
        d = np.abs(x64 - y64)
        ok = (d <= REL * np.maximum(np.abs(x64), np.abs(y64))) | (d <= SCALE_REL * scale)
        if not ok.all():
            i = int(np.argmax(~ok))
            raise Diff(f"{k}[{i}]: {x64[i]!r} vs {y64[i]!r}")
        if d.max(initial=0) > 0:
            nz = d > 0
            worst[0] = max(worst[0], float(np.max(np.minimum(d[nz] / np.maximum(np.abs(x64[nz]), np.abs(y64[nz])),
                                                              d[nz] / scale if scale else np.inf))))


def file_agrees(new, old, worst):
    with open(new, "rb") as f, open(old, "rb") as g:
        if f.read() == g.read():
            return True
    if new.endswith(".json"):
        with open(new) as f, open(old) as g:
            a, b = json.load(f), json.load(g)
        json_agree(a, b, max(max_abs(a), max_abs(b)), "", worst)
        return False
    if new.endswith(".safetensors"):
        safetensors_agree(new, old, worst)
        return False
    raise Diff("bytes differ")


def files(root):
    if os.path.isfile(root):
        return {"": root}
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = p
    return out


def main():
    new, old = sys.argv[1], sys.argv[2]
    a, b = files(new), files(old)
    bad = 0
    for rel in sorted(set(a) ^ set(b)):
        print(f"reference-check: {os.path.join(old, rel)}: in {'the regenerated tree' if rel in a else 'the repository'} only", file=sys.stderr)
        bad += 1
    rounded, worst = 0, [0.0]
    for rel in sorted(set(a) & set(b)):
        try:
            if not file_agrees(a[rel], b[rel], worst):
                rounded += 1
        except Diff as e:
            print(f"reference-check: {os.path.join(old, rel)}: {e}", file=sys.stderr)
            bad += 1
    if rounded:
        print(f"reference-check: {old}: {len(a) - rounded - bad} files byte-identical, {rounded} within float rounding "
              f"(largest difference {worst[0]:.2g} of the value, or of its file's or tensor's largest)", file=sys.stderr)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
