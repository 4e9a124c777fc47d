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
    if sys.argv[1:2] == ["--tools"]:
        return tools_main(sys.argv[2:])
    if sys.argv[1:2] == ["--env"]:
        return env_main(sys.argv[2])
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


# Tools (posttrain grpo --tools FILE.py:FUNC): `worker.py --tools SPEC...` loads the functions and
# answers {"funcs": [names], "schemas": [get_json_schema(f), ...]} (or {"error": ...}); then each
# request {"tool": i, "args": {...}} gets {"result": str(f(**args))} or, when the tool raises,
# {"raised": str(e)}: TRL 1.x turns an exception into the tool message {"error": str(e)}.
# The schema is transformers' get_json_schema (transformers 5, utils/chat_template_utils.py),
# written out here so that no transformers is needed: the description and the Google-style "Args:"
# of the docstring, the parameters' type hints.
import inspect
import re
import typing
from enum import Enum

_description_re = re.compile(r"^(.*?)[\n\s]*(Args:|Returns:|Raises:|\Z)", re.DOTALL)
_args_re = re.compile(r"\n\s*Args:\n(.*?)[\n\s]*(Returns:|Raises:|\Z)", re.DOTALL)
_args_split_re = re.compile(
    r"""
(?:^|\n)
([ \t]*)(\w+)(?:[ \t]*\([^()\n]*\))?:\s*
(.*?)\s*
(?=\n(?!\1[ \t])[ \t]*\w+(?:[ \t]*\([^()\n]*\))?:|\Z)
""",
    re.DOTALL | re.VERBOSE,
)
_returns_re = re.compile(r"\n\s*Returns:\n\s*(.*?)[\n\s]*(Raises:|\Z)", re.DOTALL)
_scalar = {int: "integer", float: "number", str: "string", bool: "boolean", type(None): "null"}
_basic = {int: {"type": "integer"}, float: {"type": "number"}, str: {"type": "string"}, bool: {"type": "boolean"},
          type(None): {"type": "null"}, list: {"type": "array"}, tuple: {"type": "array"}, dict: {"type": "object"},
          typing.Any: {}}


def _enum_schema(values):
    kinds = list(dict.fromkeys(_scalar[type(v)] for v in values))
    return {"type": kinds[0] if len(kinds) == 1 else kinds, "enum": values}


def _hint(h):
    origin, args = typing.get_origin(h), typing.get_args(h)
    if origin is None and isinstance(h, type) and issubclass(h, Enum):
        values = [m.value for m in h]
        if not values or any(type(v) not in _scalar for v in values):
            raise TypeError("the Enum %s cannot be written as a JSON schema" % h.__name__)
        return _enum_schema(values)
    if origin is None:
        if h not in _basic:
            raise TypeError("cannot convert the type hint %r to a JSON schema" % (h,))
        return dict(_basic[h])
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        subs = [_hint(t) for t in args if t is not type(None)]
        if len(subs) == 1:
            out = subs[0]
        elif all(s.keys() == {"type"} and isinstance(s["type"], str) for s in subs):
            names = sorted({s["type"] for s in subs})
            out = {"type": names[0] if len(names) == 1 else names}
        else:
            out = {"anyOf": subs}
        if type(None) in args:
            out["nullable"] = True
        return out
    if origin is typing.Literal and args:
        if any(type(a) not in _scalar for a in args):
            raise TypeError("only JSON scalars can be listed in typing.Literal")
        return _enum_schema(list(args))
    if origin is list:
        return {"type": "array", "items": _hint(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if not args:
            return {"type": "array"}
        if len(args) == 1 or ... in args:
            raise TypeError("the type hint %s is not converted to a JSON schema" % (h,))
        return {"type": "array", "prefixItems": [_hint(t) for t in args]}
    if origin is dict:
        out = {"type": "object"}
        if len(args) == 2:
            out["additionalProperties"] = _hint(args[1])
        return out
    raise TypeError("cannot convert the type hint %r to a JSON schema" % (h,))


def json_schema(f):
    name = getattr(f, "__name__", "operation")
    doc = inspect.getdoc(f)
    if not doc:
        raise ValueError("cannot generate the JSON schema of %s: it has no docstring" % name)
    doc = doc.strip()
    m = _description_re.search(doc)
    description = m.group(1).strip() if m else None
    m = _args_re.search(doc)
    arg_docs = {}
    if m:
        block = "\n".join(line for line in m.group(1).split("\n") if line.strip())
        arg_docs = {x[1]: re.sub(r"\s*\n+\s*", " ", x[2].strip()) for x in _args_split_re.findall(block)}
    m = _returns_re.search(doc)
    returns = m.group(1).strip() if m else None
    hints = typing.get_type_hints(f)
    sig = inspect.signature(f)
    first = next(iter(sig.parameters), None)
    implicit = first if first in {"self", "cls"} and sig.parameters[first].annotation == inspect.Parameter.empty else None
    required = []
    for pname, p in sig.parameters.items():
        if pname == implicit:
            continue
        if p.annotation == inspect.Parameter.empty:
            raise TypeError("argument %s of %s has no type hint" % (pname, name))
        if p.default == inspect.Parameter.empty:
            required.append(pname)
    props = {}
    for pname, h in hints.items():
        if pname == implicit:
            continue
        if pname == "return":
            try:
                props[pname] = _hint(h)
            except TypeError:
                pass
        else:
            props[pname] = _hint(h)
    params = {"type": "object", "properties": props}
    if required:
        params["required"] = required
    ret = props.pop("return", None)
    if ret is not None and returns is not None:
        ret["description"] = returns
    for arg, sch in props.items():
        if arg not in arg_docs:
            raise ValueError("cannot generate the JSON schema of %s: its docstring does not describe the argument %r" % (name, arg))
        desc = arg_docs[arg]
        choices = re.search(r"\(choices:\s*(.*?)\)\s*$", desc, flags=re.IGNORECASE)
        if choices:
            sch["enum"] = [c.strip() if isinstance(c, str) else c for c in json.loads(choices.group(1))]
            desc = choices.string[: choices.start()].strip()
        sch["description"] = desc
    out = {"name": name, "description": description, "parameters": params}
    if ret is not None:
        out["return"] = ret
    return {"type": "function", "function": out}


def tools_main(specs):
    funcs, schemas = [], []
    for spec in specs:
        try:
            f = load(spec)
            funcs.append(f)
            schemas.append(json_schema(f))
        except BaseException as e:  # noqa: BLE001 - reported to posttrain, which stops
            send({"error": "%s: %s: %s" % (spec, type(e).__name__, e), "where": where(e.__traceback__)})
            return
    send({"funcs": [f.__name__ for f in funcs], "schemas": schemas})
    for line in sys.stdin:
        req = json.loads(line)
        try:
            out = funcs[req["tool"]](**req["args"])
        except BaseException as e:  # noqa: BLE001 - a tool's exception is its result, as in TRL
            send({"raised": str(e)})
            continue
        send({"result": str(out)})


# Environments (posttrain grpo --environment FILE.py:Class, TRL 1.x's environment_factory):
# `worker.py --env SPEC` loads the class and probes one instance: {"funcs": [class name],
# "methods": [names], "schemas": [get_json_schema(method), ...], "reward": has get_reward} (or
# {"error": ...}). The public methods but reset and get_reward are the tools. Requests:
#   {"op": "reset", "rows": [row, ...]}: instance i (made as needed, then reused) is reset with
#       row i's columns as keyword arguments -> {"observations": [str or null, ...]}
#   {"op": "call", "env": i, "method": name, "args": {...}} -> {"result": str} or {"raised": str}
#   {"op": "reward", "n": n} -> {"rewards": [number or null, ...]} (instances 0..n-1's get_reward())
def env_main(spec):
    try:
        cls = load(spec)
        if not isinstance(cls, type):
            raise TypeError("%s is a %s, not a class" % (spec, type(cls).__name__))
        pool = [cls()]
        names = [n for n, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
                 if n not in ("reset", "get_reward") and not n.startswith("_")]
        if not callable(getattr(cls, "reset", None)):
            raise TypeError("%s has no reset method: an environment must define reset(**row)" % spec)
        schemas = [json_schema(getattr(pool[0], n)) for n in names]
    except BaseException as e:  # noqa: BLE001 - reported to posttrain, which stops
        send({"error": "%s: %s: %s" % (spec, type(e).__name__, e), "where": where(e.__traceback__)})
        return
    send({"funcs": [cls.__name__], "methods": names, "schemas": schemas,
          "reward": callable(getattr(cls, "get_reward", None))})
    for line in sys.stdin:
        req = json.loads(line)
        op = req["op"]
        try:
            if op == "reset":
                while len(pool) < len(req["rows"]):
                    pool.append(cls())
                obs = []
                for env, row in zip(pool, req["rows"]):
                    o = env.reset(**row)
                    if o is not None and not isinstance(o, str):
                        raise TypeError("reset returned a %s, not a string or None" % type(o).__name__)
                    obs.append(o)
                send({"observations": obs})
            elif op == "call":
                try:
                    out = getattr(pool[req["env"]], req["method"])(**req["args"])
                except BaseException as e:  # noqa: BLE001 - a tool's exception is its result, as in TRL
                    send({"raised": str(e)})
                    continue
                send({"result": str(out)})
            elif op == "reward":
                vals = convert([env.get_reward() for env in pool[: req["n"]]], req["n"])
                send({"rewards": vals})
        except BaseException as e:  # noqa: BLE001 - reported to posttrain, which stops
            send({"error": "%s: %s" % (type(e).__name__, e), "where": where(e.__traceback__)})


main()
