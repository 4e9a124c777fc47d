"""Reads posttrain's TensorBoard event files (report_to tensorboard) with TensorBoard itself.

TensorBoard 2.21.0 from PyPI (the pinned `.venv-reference/trl-0.24`; no TensorFlow, so TensorBoard
uses its own stub: its pure-Python record reader and CRC32C table):

1. Every record of every event file framed and checked by hand (both masked CRC32Cs, computed with
   tensorboard.compat.tensorflow_stub's masked_crc32c) and parsed with TensorBoard's own
   tensorboard.compat.proto.event_pb2.Event; the first record is file_version brain.Event:2.
2. TensorBoard's readers: event_accumulator.EventAccumulator (scalars) and the server's
   plugin_event_accumulator.EventAccumulator (scalars as rank-0 tensors; it takes a run's first
   SessionLog START for the session's start and purges on the later ones).

It checks the three output directories that TestRun_ReportToTensorBoard leaves with
POSTTRAIN_TB_DUMP=DIR (an SFT run on the tiny test model with report_to tensorboard, logging
every step, checkpoints every 2 steps, eval every 2: straight; killed after logging step 3;
resumed from checkpoint-2): each run's scalars are metrics.jsonl's values (float32) under HF's
tags, one per (tag, step) in the files, steps in order; the resumed run's equal the straight run's
(timings aside); and a TensorBoard that watched the killed run and then sees the resume (the killed
run's file cut in place, a new file added) shows exactly the resumed run's scalars, once each.

    make reference-tensorboard

which runs (from the repository root)

    POSTTRAIN_TB_DUMP=$(mktemp -d)/tb go test ./trainers/engine/loop/ -run TestRun_ReportToTensorBoard -count=1
    .venv-reference/trl-0.24/bin/python scripts/reference/tensorboard_check.py DIR
"""

import glob
import json
import os
import shutil
import struct
import sys
import tempfile


def main(root):
    import numpy as np
    import tensorboard
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing import plugin_event_accumulator as pea
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as masked
    from tensorboard.util import tensor_util

    print(f"tensorboard {tensorboard.__version__}")

    def read_file(path):
        data = open(path, "rb").read()
        off, out = 0, []
        while off < len(data):
            (n,) = struct.unpack_from("<Q", data, off)
            (hc,) = struct.unpack_from("<I", data, off + 8)
            assert hc == masked(data[off : off + 8]), f"{path}: length CRC at byte {off}"
            body = data[off + 12 : off + 12 + n]
            (dc,) = struct.unpack_from("<I", data, off + 12 + n)
            assert dc == masked(body), f"{path}: data CRC at byte {off}"
            out.append(event_pb2.Event.FromString(body))
            off += 16 + n
        assert out and out[0].file_version == "brain.Event:2", path
        return out

    def raw_scalars(d):
        out = {}
        for f in sorted(glob.glob(d + "/events.out.tfevents.*")):
            for e in read_file(f):
                for v in e.summary.value:
                    k = (v.tag, e.step)
                    assert k not in out, f"{d}: {k} written twice"
                    out[k] = v.simple_value
        return out

    def tb_scalars(acc):
        acc.Reload()
        out = {}
        if isinstance(acc, pea.EventAccumulator):  # the server's: scalars become rank-0 tensors
            series = {tag: [(e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in acc.Tensors(tag)] for tag in acc.Tags()["tensors"]}
        else:
            series = {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
        for tag, points in series.items():
            steps = [step for step, _ in points]
            assert steps == sorted(set(steps)), f"TensorBoard shows {tag} at steps {steps}: not once each, in order"
            for step, value in points:
                assert (tag, step) not in out, f"TensorBoard shows {tag} twice at step {step}"
                out[(tag, step)] = np.float32(value)
        return out

    def accumulators(d):
        return [ea.EventAccumulator(d, size_guidance={ea.SCALARS: 0}), pea.EventAccumulator(d, size_guidance={ea.TENSORS: 0})]

    def run_dir(out):
        (d,) = glob.glob(out + "/runs/*")
        return d

    def metrics(out):  # HF's rewrite_logs tags
        m = {}
        for line in open(out + "/metrics.jsonl"):
            r = json.loads(line)
            step = r.pop("step")
            for k, v in r.items():
                if k == "epoch":
                    tag = "train/epoch"
                elif k.startswith("eval_"):
                    tag = "eval/" + k[5:]
                else:
                    tag = "train/" + k
                m[(tag, step)] = float(v)
        return m

    def timing(tag):
        n = tag.split("/", 1)[1]
        return n.startswith(("timing_s/", "tokens_per_s/")) or n in ("runtime", "samples_per_second", "steps_per_second")

    runs = {}
    for name in ("straight", "killed", "resumed"):
        out = os.path.join(root, name)
        d = run_dir(out)
        raw = raw_scalars(d)
        for acc in accumulators(d):
            assert raw == tb_scalars(acc), f"{name}: {type(acc).__module__} differs"
        m = metrics(out)
        assert set(m) == set(raw), f"{name}: {sorted(set(m) ^ set(raw))}"
        for k, v in m.items():
            assert np.float32(v) == np.float32(raw[k]), f"{name}: {k} metrics.jsonl {v}, event file {raw[k]}"
        runs[name] = raw
        steps = sorted({s for _, s in raw})
        print(f"{name}: {len(raw)} scalars, {len({t for t, _ in raw})} tags, steps {steps}: metrics.jsonl's values")
    assert set(runs["straight"]) == set(runs["resumed"])
    for k, v in runs["straight"].items():
        assert timing(k[0]) or v == runs["resumed"][k], f"{k}: straight {v}, resumed {runs['resumed'][k]}"
    print(f"resumed == straight: {len(runs['straight'])} scalars (timings aside)")

    live = tempfile.mkdtemp(prefix="tbcheck-live-")
    for f in glob.glob(run_dir(os.path.join(root, "killed")) + "/*"):
        shutil.copy(f, live)
    accs = accumulators(live)
    before = [tb_scalars(acc) for acc in accs]
    for f in glob.glob(run_dir(os.path.join(root, "resumed")) + "/*"):
        dst = os.path.join(live, os.path.basename(f))
        if os.path.exists(dst):  # the killed run's file, cut in place by the resume
            n = os.path.getsize(f)
            assert open(dst, "rb").read()[:n] == open(f, "rb").read()
            os.truncate(dst, n)
        else:
            shutil.copy(f, live)
    for acc, b in zip(accs, before):
        after = tb_scalars(acc)
        assert after == runs["resumed"], f"{type(acc).__module__} watching the run does not show the resumed run"
        print(f"{type(acc).__module__} watching the run: {len(b)} scalars when killed, then the resumed run's {len(after)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
