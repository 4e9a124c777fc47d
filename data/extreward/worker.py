# posttrain's reward worker: loads the reward functions named on the command line and calls them
# as TRL's GRPOTrainer does (trl 0.24 grpo_trainer.py _calculate_rewards):
#
#     func(prompts=prompts, completions=completions, completion_ids=completion_ids,
#          trainer_state=state, **dataset_columns)
#
# Protocol (data/extreward/worker.go): argv[1:] are the function specs (FILE.py:FUNC or a dotted
# module.func). The worker answers one JSON line on the protocol stream: {"funcs": [names]} or
# {"error": ...}. Then each request line {"func": i, "kwargs": {...}, "state": {...}} gets one line
# {"rewards": [number or null, ...]} or {"error": "...", "where": "file:line"}. The protocol
# stream is the process's original stdout; the functions' own prints (and anything else written to
# file descriptor 1) go to stderr, so they cannot break it.
import importlib
import importlib.util
import json
import math
import numbers
import os
import sys
import sysconfig
import traceback
import types

proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
os.dup2(2, 1)
sys.stdout = sys.stderr


def send(obj):
    proto.write(json.dumps(obj, allow_nan=False) + "\n")
    proto.flush()


def where(tb):
    # The innermost frame in the user's code (not this worker): file:line.
    frames = traceback.extract_tb(tb)
    stdlib = sysconfig.get_paths()["stdlib"] + os.sep
    for fr in reversed(frames):
        f = fr.filename
        if f != "<string>" and not f.startswith("<frozen") and not f.startswith(stdlib):
            return "%s:%d" % (fr.filename, fr.lineno)
    return ""


def load(spec):
    if ":" in spec and spec.split(":", 1)[0].endswith(".py"):
        path, name = spec.rsplit(":", 1)
        path = os.path.abspath(path)
        mod_name = os.path.splitext(os.path.basename(path))[0]
        d = os.path.dirname(path)
        if d not in sys.path:
            sys.path.insert(0, d)
        s = importlib.util.spec_from_file_location(mod_name, path)
        if s is None:
            raise ImportError("cannot load %s as a Python module" % path)
        mod = importlib.util.module_from_spec(s)
        sys.modules[mod_name] = mod
        s.loader.exec_module(mod)
    else:
        mod_path, _, name = spec.rpartition(".")
        if not mod_path:
            raise ImportError("%r is neither FILE.py:FUNC nor a dotted module.func" % spec)
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())
        mod = importlib.import_module(mod_path)
    if not hasattr(mod, name):
        raise AttributeError("%s has no function %r" % (getattr(mod, "__file__", mod.__name__), name))
    f = getattr(mod, name)
    if not callable(f):
        raise TypeError("%s.%s is a %s, not a function" % (mod.__name__, name, type(f).__name__))
    return f


def convert(out, n):
    # TRL: [r if r is not None else nan for r in out], then torch.tensor(float32). posttrain is
    # stricter: a NaN returned is an error (None is "not scored"), a non-number names its index.
    if hasattr(out, "tolist"):
        out = out.tolist()
    if isinstance(out, (str, bytes, dict)) or not hasattr(out, "__len__"):
        raise TypeError("returned a %s, not a list of rewards" % type(out).__name__)
    out = list(out)
    if len(out) != n:
        raise ValueError("returned %d rewards for %d completions" % (len(out), n))
    vals = []
    for i, r in enumerate(out):
        if r is None:
            vals.append(None)
            continue
        if hasattr(r, "item") and not isinstance(r, numbers.Number):
            r = r.item()
        if isinstance(r, str) or not isinstance(r, numbers.Real):
            raise TypeError("returned a %s at index %d, not a number" % (type(r).__name__, i))
        v = float(r)
        if math.isnan(v) or math.isinf(v):
            raise ValueError("returned %r at index %d (use None for a completion it does not score)" % (v, i))
        vals.append(v)
    return vals


def main():
    funcs = []
    for spec in sys.argv[1:]:
        try:
            funcs.append(load(spec))
        except BaseException as e:  # noqa: BLE001 - reported to posttrain, which stops
            tb = e.__traceback__
            send({"error": "%s: %s" % (type(e).__name__, e), "where": where(tb)})
            return
    send({"funcs": [getattr(f, "__name__", spec) for f, spec in zip(funcs, sys.argv[1:])]})
    for line in sys.stdin:
        req = json.loads(line)
        f = funcs[req["func"]]
        kwargs = req["kwargs"]
        kwargs["trainer_state"] = types.SimpleNamespace(**req["state"])
        n = len(kwargs["completions"])
        try:
            vals = convert(f(**kwargs), n)
        except BaseException as e:  # noqa: BLE001 - reported to posttrain, which stops
            send({"error": "%s: %s" % (type(e).__name__, e), "where": where(e.__traceback__)})
            continue
        send({"rewards": vals})


main()
