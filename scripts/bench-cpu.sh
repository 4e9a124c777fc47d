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
# Debian's python3-torch calls the system BLAS (libblas.so.3, "BLAS_INFO=generic"): without an
# optimised one installed that is netlib's reference BLAS, which made PyTorch's matrix products
# 20-25x slower here (forward 5.2 s instead of 0.23 s) and the ratios flattering. OpenBLAS (the
# pthread build, which takes torch's thread count from OPENBLAS_NUM_THREADS) is installed with it.
sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
blas=/etc/alternatives/libblas.so.3-$(uname -m)-linux-gnu
if ! "$py" -c 'import torch' 2>/dev/null || ! readlink -f "$blas" 2>/dev/null | grep -q openblas; then
	echo "bench: installing Debian's python3-torch and OpenBLAS (libopenblas0-pthread)" >&2
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq python3-torch libopenblas0-pthread
fi
if ! readlink -f "$blas" | grep -q openblas; then
	echo "bench: $blas is $(readlink -f "$blas"), not OpenBLAS: PyTorch's times would be those of the reference BLAS; select OpenBLAS with update-alternatives" >&2
	exit 1
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "bench: $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
go test -run '^$' -bench '^BenchmarkCPU$' -benchtime 1x -timeout 60m ./internal/bench | tee "$out/posttrain.txt" >&2
echo "bench: PyTorch's BLAS: $(readlink -f "$blas")" >&2
OPENBLAS_NUM_THREADS="${BENCH_THREADS:-$(nproc)}" "$py" scripts/reference/cpu_bench.py --threads "${BENCH_THREADS:-$(nproc)}" --posttrain "$out/posttrain.txt"
echo "bench: finished $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
