# The JSON schemas (keys in their order) transformers' get_json_schema gives the test tools of
# data/extreward (testdata/tools.py, and envs.py's Counter.add), which posttrain's tool and
# environment workers must reproduce. Run in the TRL 1.x venv
# (transformers 5): .venv-reference/trl-1/bin/python scripts/reference/tool_schemas.py [--out TREE]
# (TREE: where data/extreward/testdata/tool_schemas.json is written under; the repository by default)
import json
import os
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data", "extreward", "testdata")
sys.path.insert(0, root)
import envs  # noqa: E402
import tools  # noqa: E402
from transformers.utils import get_json_schema  # noqa: E402

out = {name: get_json_schema(getattr(tools, name)) for name in ["multiply", "lookup", "convert", "fails", "slow"]}
out["Counter.add"] = get_json_schema(envs.Counter().add)  # a bound method: self is not a parameter
tree = sys.argv[2] if len(sys.argv) > 2 and sys.argv[1] == "--out" else os.path.join(root, "..", "..", "..")
dst = os.path.join(tree, "data", "extreward", "testdata")
os.makedirs(dst, exist_ok=True)
with open(os.path.join(dst, "tool_schemas.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
