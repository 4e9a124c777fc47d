#!/usr/bin/env bash
# decode-compare.sh OLD_BIN NEW_BIN — `posttrain bench decode` of two posttrain binaries side by
# side on one machine: the same random-weight checkpoint (posttrain init --preset), rounds of one
# run each, the order alternating (old first in odd rounds), the 1-minute load average recorded
# before each run. Prints one line per run and, per round, new ÷ old tokens/s, unless the two
# sides' load averages differ by more than 1 (then the round says so and gives no ratio).
#
#   PRESET=smollm2-135m BATCH=64 PROMPT_LEN=64 NEW_TOKENS=256 ROUNDS=2 BACKEND=xla:cpu DTYPE=float32
#   OLD_ARGS=... NEW_ARGS=...   extra bench decode flags of each side: the same binary twice with
#                               NEW_ARGS="--decode-steps-per-call 8" compares one decode step per
#                               execution with eight
#
# Build the old binary from another commit with `git worktree add DIR COMMIT && (cd DIR && go
# build -o /tmp/posttrain-old ./cmd/posttrain)`.
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_BIN NEW_BIN" >&2; exit 2; }
old=$1 new=$2
preset=${PRESET:-smollm2-135m} batch=${BATCH:-64} plen=${PROMPT_LEN:-64} newtok=${NEW_TOKENS:-256}
rounds=${ROUNDS:-2} backend=${BACKEND:-xla:cpu} dtype=${DTYPE:-float32}
read -r -a old_args <<<"${OLD_ARGS:-}"
read -r -a new_args <<<"${NEW_ARGS:-}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$new" init --preset "$preset" --out "$tmp/model" >/dev/null
tps() { # tokens/s of the first run of a bench decode JSON (tokens_per_s before it was renamed)
	python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"][0]; print(r.get("tokens_per_second", r.get("tokens_per_s")), r.get("step_seconds"), r.get("host_seconds_per_step"))'
}
for r in $(seq "$rounds"); do
	order=(old new)
	[ $((r % 2)) -eq 0 ] && order=(new old)
	declare -A got=() load=()
	for side in "${order[@]}"; do
		bin=$old args=("${old_args[@]}")
		[ "$side" = new ] && bin=$new args=("${new_args[@]}")
		load[$side]=$(cut -d' ' -f1 /proc/loadavg)
		out=$("$bin" bench decode --model "$tmp/model" --backend "$backend" --dtype "$dtype" \
			--batch "$batch" --prompt-len "$plen" --new-tokens "$newtok" "${args[@]}" 2>/dev/null)
		read -r got[$side] step host <<<"$(tps <<<"$out")"
		echo "round $r $side: load ${load[$side]}, batch $batch, prompt $plen, new $newtok ${args[*]}: ${got[$side]} tokens/s, step $step s, host $host s/step"
	done
	python3 -c "
import sys
old, new, lo, ln = map(float, sys.argv[1:])
if abs(lo - ln) > 1:
    print(f'round $r: no ratio: load averages {lo} (old) and {ln} (new) differ by more than 1')
else:
    print(f'round $r: new / old = {new / old:.2f}')" "${got[old]}" "${got[new]}" "${load[old]}" "${load[new]}"
done
