#!/usr/bin/env bash
# `make bench`: posttrain's CPU workloads (bench/ BenchmarkCPU) on the pure-Go backend and
# on xla:cpu (when `make xla-cpu` installed the plugin), then, in the same run, the same workloads
# in PyTorch 2.x from PyPI (scripts/reference/cpu_bench.py in the venv of `make reference-env`,
# which this script builds when it is missing: torch's default CPU kernels), and one table of the
# three with the ratios and the compile times. PyTorch runs with $BENCH_THREADS threads (default:
# the number of CPUs). The machine's load average is printed before, between the sides and after:
# other jobs on the same cores skew every side.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${REFERENCE_VENV_DIR:-.venv-reference}/trl-0.24
scripts/reference-env.sh trl-0.24
threads=${BENCH_THREADS:-$(nproc)}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
load() { echo "bench: $1 $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2; }
echo "bench: $(nproc) CPUs, commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" >&2
go test -c -o "$out/bench.test" ./bench
# run BACKEND FILE: BenchmarkCPU on BACKEND, its output in FILE (and on stderr).
run() {
	load "BenchmarkCPU on $1, start"
	(cd bench && GOMLX_BACKEND=$1 "$out/bench.test" -test.run '^$' -test.bench '^BenchmarkCPU$' \
		-test.benchtime 1x -test.timeout 60m) | tee "$2" >&2
}
run go "$out/go.txt"
xla=()
if [ -f bin/xla/pjrt_c_api_cpu_plugin.so ] || [ -n "${PJRT_PLUGIN_LIBRARY_PATH:-}" ]; then
	run xla:cpu "$out/xla.txt"
	xla=(--posttrain-xla "$out/xla.txt")
else
	echo "bench: no XLA CPU plugin (make xla-cpu): the xla:cpu column stays empty" >&2
fi
load "PyTorch, start"
OMP_NUM_THREADS=$threads "$venv/bin/python" scripts/reference/cpu_bench.py --threads "$threads" \
	--posttrain "$out/go.txt" "${xla[@]}"
load "finished"
