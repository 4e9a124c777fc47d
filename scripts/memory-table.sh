#!/usr/bin/env bash
# memory-table.sh [BIN] — docs/gpu.md's "what fits" table: `posttrain bench memory` (XLA's buffer
# assignment of one optimizer step, compiled from shapes; nothing of the models' size allocated)
# for each preset × method × full/LoRA, in bfloat16 with float32 masters and AdamW state, with
# the methods' TRL defaults (gradient checkpointing on; batch 8, rows of 1,024 tokens, DPO 8
# pairs, GRPO 8 completions of 256 after prompts of 512), LoRA PEFT's default (r 16, q_proj and
# v_proj). Prints one markdown row per plan: its total in GB and which of 24, 40, 80 and 141 GB
# devices it fits in with XLA's GPU client's default 90% (posttrain's memory_fraction).
#
#   PRESETS="qwen2.5-0.5b qwen2.5-1.5b qwen2.5-7b llama-3.1-8b" METHODS="sft dpo grpo" BACKEND=xla:cpu
set -euo pipefail
bin=${1:-bin/posttrain}
presets=${PRESETS:-qwen2.5-0.5b qwen2.5-1.5b qwen2.5-7b llama-3.1-8b}
methods=${METHODS:-sft dpo grpo}
backend=${BACKEND:-xla:cpu}
echo "| model | method | trained | state GB | step GB | total GB | 24 GB | 40 GB | 80 GB | 141 GB |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for p in $presets; do
	for m in $methods; do
		for peft in "" --use-peft; do
			"$bin" bench memory --preset "$p" --method "$m" --backend "$backend" --gradient-checkpointing $peft --json 2>/dev/null |
				python3 -c '
import json, sys
d = json.load(sys.stdin)
G = 1e9
fits = ["yes" if d["total_bytes"] <= 0.9 * c * 2**30 else "no" for c in (24, 40, 80, 141)]
trained = "LoRA" if d.get("peft") else "full"
print("| %s | %s | %s | %.1f | %.1f | %.1f | %s |" % (d["preset"], d["method"], trained, d["state_bytes"] / G,
      (d["total_bytes"] - d["state_bytes"]) / G, d["total_bytes"] / G, " | ".join(fits)))'
		done
	done
done
