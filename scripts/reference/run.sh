#!/usr/bin/env bash
# `make reference` and `make reference-check`: the goldens made by the pinned reference venvs
# (`make reference-env`; scripts/reference/README.md, "Goldens").
#
#   scripts/reference/run.sh           # regenerate every golden below in place
#   scripts/reference/run.sh --check   # regenerate them into a temporary tree; fail on any difference
#
# GENERATORS has one line per generator: the venv it runs in, the paths it writes (relative to the
# repository; --check compares each with compare_tree.py: a missing, extra or changed file fails,
# but for floats within float32 rounding, which torch's CPU kernels give differently from one CPU
# to another), and
# the script. Every script takes `--out TREE` and writes its files at their repository paths under
# TREE (default: the repository), deterministically (fixed seeds, one thread, stable JSON).
set -euo pipefail
cd "$(dirname "$0")/../.."
venvs=${REFERENCE_VENV_DIR:-.venv-reference}

GENERATORS=(
	"trl-1    models/testdata/hf-5.24.0  scripts/reference/hf_families.py"
	"trl-0.24 models/testdata/hf-4.57.6  scripts/reference/hf_families.py"
	"trl-0.24 models/testdata/peft-0.21.2/qwen2-default,models/testdata/peft-0.21.2/qwen3-rslora-all-linear,models/testdata/peft-0.21.2/smollm2-attn-lm-head,models/testdata/peft-0.21.2/gemma3-mlp-norm,models/testdata/peft-0.21.2/posttrain-sft/expected  scripts/reference/peft_adapters.py"
	"trl-0.24 toy/gym/testdata/trajectories.json  scripts/reference/gym_classic_control.py"
	"trl-0.24 data/extreward/testdata/trl_rewards.json  scripts/reference/trl_rewards.py"
	"trl-0.24 data/extreward/testdata/accuracy_reward.json  scripts/reference/accuracy_reward.py"
	"trl-0.24 data/testdata/datasets  scripts/reference/dataset_files.py"
	"trl-1    trainers/grpo/testdata/trl1_parity  scripts/reference/trl1_parity.py"
	"trl-1    trainers/grpo/testdata/trl1_parity_tools  scripts/reference/trl1_parity_tools.py"
	"trl-1    data/extreward/testdata/tool_schemas.json  scripts/reference/tool_schemas.py"
	"trl-1    models/encode/testdata/llama3_tools,data/tools/testdata/qwen25_parse.json  scripts/reference/llama3_tools.py"
	"openenv  data/extreward/openenvtest/testdata  scripts/reference/openenv_transcript.py"
	"trl-0.24 trainers/sft/testdata/trl_parity,trainers/dpo/testdata/trl_parity,trainers/kto/testdata/trl_parity,trainers/reward/testdata/trl_parity,trainers/grpo/testdata/trl_parity,trainers/ppo/testdata/trl_parity  scripts/reference/trl_parity.py"
)

check=false
case "${1:-}" in
--check) check=true ;;
"") ;;
*) echo "usage: $0 [--check]" >&2; exit 2 ;;
esac

tree=.
if $check; then
	tree=$(mktemp -d)
	trap 'rm -rf "$tree"' EXIT
fi
failed=0
for g in "${GENERATORS[@]}"; do
	read -r venv paths script <<<"$g"
	py=$venvs/$venv/bin/python
	if [ ! -x "$py" ]; then
		echo "reference: $py is missing: run make reference-env" >&2
		exit 1
	fi
	echo "reference: $venv: $script → $paths" >&2
	"$py" "$script" --out "$tree" 2> >(grep -v "right-padding was detected" >&2)
	if $check; then
		for p in ${paths//,/ }; do
			if ! "$py" scripts/reference/compare_tree.py "$tree/$p" "$p"; then
				echo "reference-check: $p differs from what $script writes in $venv" >&2
				failed=1
			fi
		done
	fi
done
if $check; then
	[ "$failed" = 0 ] && echo "reference-check: every golden regenerated: byte for byte, or within float rounding where said above" >&2
	exit "$failed"
fi
