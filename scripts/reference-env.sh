#!/usr/bin/env bash
# `make reference-env`: the pinned PyTorch / transformers / TRL reference environments, one venv
# per requirements file (scripts/reference/README.md, "The reference environments"):
#
#   scripts/reference/requirements.txt       → .venv-reference/trl-0.24  (TRL 0.24.0, transformers 4.57.6)
#   scripts/reference/requirements-trl1.txt  → .venv-reference/trl-1     (TRL 1.16.0, transformers 5.24.0)
#   scripts/reference/requirements-openenv.txt → .venv-reference/openenv (openenv-core 0.3.0)
#
# Each file is the `pip freeze` of a venv built from its top-level pins (the file's header says
# which), so it pins every transitive package; it is installed with --no-deps, then `pip check`
# confirms the set is consistent and the imports print their versions. Idempotent: a venv whose
# stamp (.requirements.sha256) matches its file's sha256 is left alone; otherwise it is rebuilt
# from scratch. `scripts/reference-env.sh trl-0.24` builds only that one. Nothing here is needed
# by `go test`.
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
root=${REFERENCE_VENV_DIR:-.venv-reference}
envs=("trl-0.24:scripts/reference/requirements.txt" "trl-1:scripts/reference/requirements-trl1.txt" "openenv:scripts/reference/requirements-openenv.txt")
check='import importlib, importlib.metadata, sys
ms = {"openenv": ["openenv-core", "fastapi", "uvicorn", "pydantic", "websockets"]}.get(sys.argv[1],
    ["torch", "transformers", "trl", "peft", "tokenizers", "gymnasium", "tensorboard", "safetensors"])
for m in ms:
    importlib.import_module({"openenv-core": "openenv"}.get(m, m))
    print(f"{m} {importlib.metadata.version(m)}")'

build() {
	local name=$1 req=$2 venv=$root/$1
	local sum
	sum=$(sha256sum "$req" | cut -d' ' -f1)
	if [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements.sha256" 2>/dev/null)" = "$sum" ]; then
		echo "reference-env: $venv matches $req (sha256 ${sum:0:12}…): nothing to do" >&2
		return
	fi
	echo "reference-env: building $venv from $req" >&2
	rm -rf "$venv"
	"$py" -m venv "$venv"
	"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps -r "$req"
	"$venv/bin/pip" check --disable-pip-version-check
	"$venv/bin/python" -c "$check" "$name" | sed "s/^/reference-env: $name: /" >&2
	echo "$sum" >"$venv/.requirements.sha256" # last: a failed build is rebuilt next time
}

for e in "${envs[@]}"; do
	name=${e%%:*}
	if [ $# -gt 0 ] && [[ " $* " != *" $name "* ]]; then continue; fi
	build "$name" "${e#*:}"
done
