#!/usr/bin/env bash
# `make bench`: posttrain's CPU workloads (apps/bench BenchmarkCPU) on xla:cpu and the same workloads
# in PyTorch 2.x from PyPI (scripts/reference/cpu_bench.py in the venv of `make reference-env`,
# which this script builds when it is missing: torch's default CPU kernels), interleaved in
# rounds so that both sides meet the same machine, then one table (apps/bench/cpucompare).
#
# Round r = 1..$BENCH_ROUNDS (default 3) runs each side once: posttrain xla:cpu then PyTorch in odd
# rounds, the reverse in even ones. Before each side it records the time and the 1-minute load
# average (/proc/loadavg). The table gives, per workload, the median over the rounds of each
# round's ratio (posttrain time ÷ PyTorch time; for decode, PyTorch tokens/s ÷ posttrain tokens/s:
# below 1, posttrain is faster), its min and max, and the medians of the figures. When in some
# round the load averages before the posttrain side and before the PyTorch side differ by more
# than 1, there is no table: one line names the round and both loads, and the exit status is 1.
# Either way every round's figures go to one JSON file ($BENCH_OUT, default bench-results.json in
# a new temporary folder, which also keeps each side's output), whose path is printed.
#
# An untimed warm-up side runs before round 1: the 1-minute load average before a side includes
# the tail of the side before it (its own threads, about 1.5 on 2 cores), so without it round 1's
# first side would be the only one measured after an idle minute.
#
#   BENCH_ROUNDS=3     rounds; fewer than 3 marks the table as a quick look
#   BENCH_GO=1         also the pure-Go backend in every round (3-7× slower than xla:cpu; the
#                      posttrain side when the XLA plugin is missing)
#   BENCH_ONLY=a,b     only these workloads (forward, adamw, grpo, decode, decode_bf16): a quick look
#   BENCH_THREADS=n    PyTorch's threads (default: the number of CPUs)
#   BENCH_OUT=path     the JSON file of all rounds
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${REFERENCE_VENV_DIR:-.venv-reference}/trl-0.24
rounds=${BENCH_ROUNDS:-3}
threads=${BENCH_THREADS:-$(nproc)}
only=${BENCH_ONLY:-}
if ! [[ $rounds =~ ^[1-9][0-9]*$ ]]; then
	echo "bench: BENCH_ROUNDS=$rounds: want a positive number of rounds" >&2
	exit 2
fi
quick=()
[ "$rounds" -ge 3 ] || quick+=("$rounds round$([ "$rounds" = 1 ] || echo s), fewer than 3 (BENCH_ROUNDS)")
[ -z "$only" ] || quick+=("workloads $only only (BENCH_ONLY)")
posttrain=()
if [ -f bin/xla/pjrt_c_api_cpu_plugin.so ] || [ -n "${PJRT_PLUGIN_LIBRARY_PATH:-}" ]; then
	posttrain+=(xla:cpu)
else
	echo "bench: no XLA CPU plugin (make xla-cpu): posttrain runs on the pure-Go backend only" >&2
fi
if [ "${BENCH_GO:-0}" = 1 ] || [ ${#posttrain[@]} = 0 ]; then
	posttrain+=(go)
fi

scripts/reference-env.sh trl-0.24
work=$(mktemp -d "${TMPDIR:-/tmp}/posttrain-bench.XXXXXX")
out=${BENCH_OUT:-$work/bench-results.json}
trap 'rm -f "$work/bench.test" "$work/cpucompare"' EXIT
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "bench: $(nproc) CPUs, commit $commit, rounds: $rounds of ${posttrain[*]} and PyTorch; every round's figures: $out (side outputs in $work)" >&2
go test -c -o "$work/bench.test" ./apps/bench
go build -o "$work/cpucompare" ./apps/bench/cpucompare

# side NAME FILE: one side once, its output in FILE (BenchmarkCPU's text, or cpu_bench.py's JSON).
side() {
	case $1 in
	pytorch)
		OMP_NUM_THREADS=$threads "$venv/bin/python" scripts/reference/cpu_bench.py --threads "$threads" \
			${only:+--only "$only"} --json "$2"
		;;
	*)
		local filter='^BenchmarkCPU$'
		[ -z "$only" ] || filter="^BenchmarkCPU\$/^(${only//,/|})\$"
		(cd apps/bench && GOMLX_BACKEND=$1 "$work/bench.test" -test.run '^$' -test.bench "$filter" \
			-test.benchtime 1x -test.timeout 60m) | tee "$2" >&2
		;;
	esac
}
load1() { cut -d' ' -f1 /proc/loadavg; }

# record ROUND NAME EXT: runs the side and appends its line to the sides file; a failed side is
# recorded (and makes cpucompare refuse), the rounds go on.
record() {
	local file=$work/round$1-${2/:/-}.$3 start load t0 ms rc=0
	start=$(date -u '+%Y-%m-%dT%H:%M:%SZ')
	load=$(load1)
	echo "bench: round $1, $2, start $start, load average $load" >&2
	t0=$(date +%s%N)
	side "$2" "$file" || rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	printf '{"round":%d,"side":"%s","start":"%s","load1":%s,"load1_after":%s,"seconds":%d.%03d,"exit":%d,"output":"%s"}\n' \
		"$1" "$2" "$start" "$load" "$(load1)" $((ms / 1000)) $((ms % 1000)) "$rc" "$file" >>"$work/sides.jsonl"
}

order=("${posttrain[0]}" pytorch "${posttrain[@]:1}")
echo "bench: warm-up (untimed), ${order[0]}, load average $(load1)" >&2
side "${order[0]}" "$work/warmup.out" >"$work/warmup.log" 2>&1 || echo "bench: the warm-up failed ($work/warmup.log)" >&2
for ((r = 1; r <= rounds; r++)); do
	names=("${order[@]}")
	if ((r % 2 == 0)); then
		names=()
		for ((i = ${#order[@]} - 1; i >= 0; i--)); do names+=("${order[i]}"); done
	fi
	for s in "${names[@]}"; do
		ext=txt
		[ "$s" != pytorch ] || ext=json
		record "$r" "$s" "$ext"
	done
done
echo "bench: finished $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
q=$(IFS=';'; echo "${quick[*]}")
"$work/cpucompare" -sides "$work/sides.jsonl" -out "$out" -commit "$commit" \
	-quick "${q//;/; }"
echo "bench: every round's figures: $out" >&2
