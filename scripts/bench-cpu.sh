#!/usr/bin/env bash
# `make bench`: posttrain's CPU workloads (internal/bench BenchmarkCPU) and, right after them in
# the same run, the same workloads in PyTorch (scripts/reference/cpu_bench.py: Debian's
# python3-torch, installed with apt-get when missing), then one table of both sides and their
# ratio. The backend is $GOMLX_BACKEND's (default: the pure-Go one); PyTorch runs with
# $BENCH_THREADS threads (default: the number of CPUs). The machine's load average is printed
# before and after: other jobs on the same cores skew both sides.
set -euo pipefail
cd "$(dirname "$0")/.."
py=/usr/bin/python3 # Debian's torch installs into the system Python, not into a python3 earlier on PATH
if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "bench: PyTorch is missing; installing Debian's python3-torch" >&2
	sudo=""
	if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq python3-torch
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
go test -run '^$' -bench '^BenchmarkCPU$' -benchtime 1x -timeout 60m ./internal/bench | tee "$out/posttrain.txt" >&2
"$py" scripts/reference/cpu_bench.py --threads "${BENCH_THREADS:-$(nproc)}" --posttrain "$out/posttrain.txt"
echo "bench: finished $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
