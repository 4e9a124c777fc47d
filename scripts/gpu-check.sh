#!/usr/bin/env bash
# gpu-check.sh — prove and measure posttrain's GPU path in one short run (designed for < 8 minutes
# on one H200), or the same stages end to end on a CPU with --cpu (tiny model, pure-Go backend).
#
#   scripts/gpu-check.sh            GPU box: XLA backend through the CUDA PJRT plugin found on the
#                                   machine (JAX's jax_plugins/xla_cuda*/xla_cuda_plugin.so), model
#                                   of exactly Qwen2.5-0.5B's shape, full workloads
#   scripts/gpu-check.sh --cpu      CPU: --backend go, preset tiny, tiny workloads (make gpu-check-cpu)
#
# Options: --cpu, --bin PATH (default bin/posttrain), --out DIR (default $OUT, else out/gpu-check),
# --budget SECONDS (whole run), --keep (keep the work directory). Every size below can be set from
# the environment (PRESET, BACKEND, BENCH_DTYPE, DECODE_BATCH, SFT_BATCH, ...; see "Settings"), and
# ONLY=REGEX runs only the stages whose names match (the others are recorded as skipped).
#
# It needs a posttrain binary built with cgo (the XLA backend in): `go build -o bin/posttrain
# ./cmd/posttrain`; nothing is downloaded (GOMLX_NO_AUTO_INSTALL=1). The PyTorch + transformers
# side (scripts/gpu/hf_reference.py) runs where `python3 -c 'import torch, transformers'` works and
# is recorded as skipped elsewhere.
#
# Stages run one after another, each under its own timeout and within the whole run's budget; a
# stage that fails or times out is recorded and the run goes on (stages that need it are skipped).
# Results: $OUT/report.json (every stage's status and JSON output, the log-prob check, throughput
# side by side), $OUT/summary.txt (printed at the end) and $OUT/gpu-check.log (all stderr).
# Exit status: 0 when every stage that ran passed, 1 otherwise, 2 on a usage error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=gpu
BIN=${POSTTRAIN_BIN:-$ROOT/bin/posttrain}
OUT_DIR=${OUT:-$ROOT/out/gpu-check}
BUDGET=${BUDGET:-}
KEEP=${KEEP:-0}
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) MODE=cpu ;;
    --gpu) MODE=gpu ;;
    --bin) BIN=$2; shift ;;
    --out) OUT_DIR=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --keep) KEEP=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
case $OUT_DIR in /*) ;; *) OUT_DIR=$PWD/$OUT_DIR ;; esac
if [ ! -x "$BIN" ]; then
  echo "gpu-check: no posttrain binary at $BIN; build it first: go build -o bin/posttrain ./cmd/posttrain" >&2
  exit 2
fi

# ---- Settings (environment overrides the mode's default) ----
if [ "$MODE" = cpu ]; then
  : "${PRESET:=tiny}" "${BACKEND:=go}" "${BENCH_DTYPE:=float32}" "${BUDGET:=300}"
  : "${SCORE_ROWS:=4}" "${SCORE_LEN:=32}"
  : "${DECODE_BATCH:=1,4}" "${DECODE_PROMPT:=8}" "${DECODE_NEW:=8}"
  : "${SFT_BATCH:=2}" "${SFT_LEN:=32}" "${SFT_STEPS:=2}"
  : "${GRPO_PROMPTS:=2}" "${GRPO_GENS:=4}" "${GRPO_PROMPT:=8}" "${GRPO_NEW:=8}" "${GRPO_MICRO:=4}"
  : "${PEAK_TFLOPS:=0}" "${TOL_PROBE:=1e-4}" "${TOL_F32:=2e-3}" "${TOL_BF16:=0.15}"
  : "${TOKENIZER:=$ROOT/internal/tinymodel/files}"
  : "${TRAINER_SFT_ARGS:=--max-steps 3 --per-device-train-batch-size 8}"
  : "${TRAINER_GRPO_ARGS:=--bf16 --max-steps 2 --per-device-train-batch-size 8 --num-generations 4 --max-completion-length 8}"
  : "${T_PROBE:=60}" "${T_INIT:=60}" "${T_SCORE:=60}" "${T_HF_SCORE:=120}" "${T_DECODE:=60}" "${T_SFT:=60}" "${T_GRPO:=60}" "${T_HF_BENCH:=120}" "${T_TRAINER:=60}"
else
  : "${PRESET:=qwen2.5-0.5b}" "${BACKEND:=}" "${BENCH_DTYPE:=bfloat16}" "${BUDGET:=450}"
  : "${SCORE_ROWS:=4}" "${SCORE_LEN:=128}"
  : "${DECODE_BATCH:=1,64,256}" "${DECODE_PROMPT:=64}" "${DECODE_NEW:=64}"
  : "${SFT_BATCH:=8}" "${SFT_LEN:=512}" "${SFT_STEPS:=3}"
  : "${GRPO_PROMPTS:=64}" "${GRPO_GENS:=8}" "${GRPO_PROMPT:=64}" "${GRPO_NEW:=64}" "${GRPO_MICRO:=64}"
  # H200 dense bf16 matrix product as measured on this workplace's machines (device/KINDS.md).
  if [ "$BENCH_DTYPE" = bfloat16 ]; then : "${PEAK_TFLOPS:=790}"; else : "${PEAK_TFLOPS:=0}"; fi
  # XLA may run float32 matrix products in TF32 on tensor cores (~1e-3 relative) unless the NVIDIA
  # libraries honour NVIDIA_TF32_OVERRIDE=0 (set for the float32 checks below): tolerances allow it,
  # and the report's max |Δ| shows which one ran (~1e-6 full float32, ~1e-3 TF32).
  : "${TOL_PROBE:=2e-3}" "${TOL_F32:=5e-3}" "${TOL_BF16:=0.15}"
  # The real trainers (optional, last), both in bf16 with float32 masters; GRPO at 64 prompts × 8
  # completions × 64 tokens per step in 8 accumulated micro-batches of 64.
  : "${TOKENIZER:=$ROOT/data/tokenizer/testdata}"
  : "${TRAINER_SFT_ARGS:=--bf16 --max-steps 5 --per-device-train-batch-size 8 --max-length 512}"
  : "${TRAINER_GRPO_ARGS:=--bf16 --max-steps 2 --per-device-train-batch-size 64 --gradient-accumulation-steps 8 --num-generations 8 --max-completion-length 64}"
  : "${T_PROBE:=90}" "${T_INIT:=90}" "${T_SCORE:=90}" "${T_HF_SCORE:=120}" "${T_DECODE:=90}" "${T_SFT:=120}" "${T_GRPO:=180}" "${T_HF_BENCH:=120}" "${T_TRAINER:=180}"
fi
SEED=${SEED:-1}
PARITY_STEPS=${PARITY_STEPS:-5}
START=$(date +%s)
DEADLINE=$((START + BUDGET - 15)) # the report needs a few seconds at the end

mkdir -p "$OUT_DIR"
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")}
mkdir -p "$WORK"
cleanup() { if [ "$KEEP" != 1 ]; then rm -rf "$WORK"; else echo "gpu-check: work directory kept: $WORK"; fi; }
trap cleanup EXIT
LOG=$WORK/gpu-check.log
STAGES=$WORK/stages.jsonl
: >"$LOG"
: >"$STAGES"
declare -A STATUS=()
INFO=(--info "mode=$MODE" --info "preset=$PRESET" --info "bench_dtype=$BENCH_DTYPE" --info "seed=$SEED"
      --info "posttrain=$("$BIN" --version 2>/dev/null | head -1)" --info "host=$(hostname 2>/dev/null || echo unknown)"
      --info "started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)")

log() { echo "gpu-check: $*" | tee -a "$LOG" >&2; }

# record NAME STATUS RC SECONDS RESULT NOTE — one JSON line per stage (NOTE: quotes are replaced).
record() {
  local note=${6//[\"\\]/\'}
  note=${note//$'\n'/ }
  note=${note//$'\t'/ }
  printf '{"name":"%s","status":"%s","rc":%d,"seconds":%s,"result":"%s","note":"%s"}\n' \
    "$1" "$2" "$3" "$4" "$5" "$note" >>"$STAGES"
  STATUS[$1]=$2
  printf 'gpu-check: %-18s %-8s %6ss %s\n' "$1" "$2" "$4" "$6" >&2
}

# needs NAME DEP... — true when every DEP passed, else records NAME as skipped.
needs() {
  local name=$1 d
  shift
  for d in "$@"; do
    if [ "${STATUS[$d]:-}" != ok ]; then
      record "$name" skipped 0 0 "" "needs $d (${STATUS[$d]:-not run})"
      return 1
    fi
  done
}

# stage NAME LIMIT KIND CMD... — runs CMD under min(LIMIT, time left), stdout to $WORK/NAME.out,
# stderr to the log; KIND json: stdout is the stage's JSON result; jsonl:FILE: FILE (JSON lines,
# e.g. a trainer's metrics.jsonl) is; text: no result.
stage() {
  local name=$1 limit=$2 kind=$3 left rc=0 t0 t1 secs result=""
  shift 3
  if [ -n "${ONLY:-}" ] && ! [[ $name =~ $ONLY ]]; then
    record "$name" skipped 0 0 "" "not selected (ONLY=$ONLY)"
    return 0
  fi
  left=$((DEADLINE - $(date +%s)))
  if [ "$left" -lt 10 ]; then
    record "$name" skipped 0 0 "" "time budget spent"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  printf '\n== %s (limit %ss): %s\n' "$name" "$limit" "$*" >>"$LOG"
  t0=$(date +%s.%N)
  timeout -k 15 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
  t1=$(date +%s.%N)
  cat "$WORK/$name.err" >>"$LOG"
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  [ "$kind" = json ] && result=$WORK/$name.out
  if [ "$rc" -eq 0 ] && [ "${kind#jsonl:}" != "$kind" ]; then # a JSON-lines file becomes {"metrics": [...]}
    if [ -s "${kind#jsonl:}" ]; then
      { printf '{"metrics": ['; paste -sd, "${kind#jsonl:}"; printf ']}\n'; } >"$WORK/$name.json"
      result=$WORK/$name.json
    fi
  fi
  if [ "$rc" -eq 0 ]; then
    record "$name" ok 0 "$secs" "$result" ""
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    record "$name" timeout "$rc" "$secs" "" "no result within ${limit}s"
    tail -n 5 "$WORK/$name.err" | sed 's/^/    /' >&2
  else
    local last
    last=$(grep -v '^[[:space:]]*$' "$WORK/$name.err" | tail -n 1 || true)
    [ "${#last}" -gt 400 ] && last="${last:0:180} … ${last: -200}"
    record "$name" failed "$rc" "$secs" "" "$last"
    tail -n 5 "$WORK/$name.err" | sed 's/^/    /' >&2
  fi
}

# ---- Backend: on a GPU box, the CUDA PJRT plugin that JAX installed, by absolute path ----
export GOMLX_NO_AUTO_INSTALL=1 # never download a plugin during the check
GO_ENV=(env)
find_cuda_plugin() {
  if [ -n "${PJRT_CUDA_PLUGIN:-}" ]; then echo "$PJRT_CUDA_PLUGIN"; return; fi
  local p=""
  if command -v python3 >/dev/null 2>&1; then
    p=$(python3 -c '
import glob, os, sys
hits = []
for d in sys.path:
    hits += glob.glob(os.path.join(d or ".", "jax_plugins", "xla_cuda*", "xla_cuda_plugin.so"))
hits = sorted(set(os.path.realpath(h) for h in hits), reverse=True)  # xla_cuda13 before xla_cuda12
print(hits[0] if hits else "")' 2>/dev/null || true)
  fi
  if [ -z "$p" ]; then
    p=$(find /opt /usr /root /home -path '*jax_plugins/xla_cuda*/xla_cuda_plugin.so' -print 2>/dev/null | sort -r | head -n 1 || true)
  fi
  echo "$p"
}
if [ "$MODE" = gpu ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1 || true)
    INFO+=(--info "gpu=${GPU:-nvidia-smi failed}")
    nvidia-smi >>"$LOG" 2>&1 || true
  else
    INFO+=(--info "gpu=no nvidia-smi")
  fi
  if [ -z "$BACKEND" ]; then
    PLUGIN=$(find_cuda_plugin)
    if [ -n "$PLUGIN" ] && [ -f "$PLUGIN" ]; then
      BACKEND="xla:$PLUGIN"
      SITE=$(dirname "$(dirname "$(dirname "$PLUGIN")")") # …/site-packages
      # go-xla v0.1.4 would set XLA_FLAGS to a hard-coded /home/janpf/... CUDA directory; an
      # explicit --xla_gpu_cuda_data_dir (the directory holding nvvm/libdevice) is left alone.
      CUDA_DIR=""
      LIBDEVICE=$(find "$SITE/nvidia" -name 'libdevice*.bc' -print 2>/dev/null | head -n 1 || true)
      if [ -n "$LIBDEVICE" ]; then
        CUDA_DIR=$(dirname "$(dirname "$(dirname "$LIBDEVICE")")") # …/nvvm/libdevice/libdevice.10.bc
      elif [ -d /usr/local/cuda/nvvm/libdevice ]; then
        CUDA_DIR=/usr/local/cuda
      else
        CUDA_DIR=$SITE/nvidia
      fi
      case "${XLA_FLAGS:-}" in
        *--xla_gpu_cuda_data_dir*) ;;
        *) export XLA_FLAGS="--xla_gpu_cuda_data_dir=$CUDA_DIR${XLA_FLAGS:+ $XLA_FLAGS}" ;;
      esac
      PTXAS=$(find "$SITE/nvidia" -name ptxas -type f -print 2>/dev/null | head -n 1 || true)
      [ -n "$PTXAS" ] && export PATH="$(dirname "$PTXAS"):$PATH"
      # The NVIDIA libraries of the pip wheels (the plugin's RPATH should find them; this is a fallback).
      LIBS=$(find "$SITE/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | paste -sd: - || true)
      [ -n "$LIBS" ] && GO_ENV=(env "LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
      INFO+=(--info "plugin=$PLUGIN" --info "cuda_data_dir=$CUDA_DIR" --info "ptxas=${PTXAS:-not found}")
    else
      log "no CUDA PJRT plugin found (jax_plugins/xla_cuda*/xla_cuda_plugin.so); set PJRT_CUDA_PLUGIN or BACKEND"
      BACKEND="xla:cuda" # fails fast at the probe without auto-install; recorded in the report
    fi
  fi
  INFO+=(--info "xla_flags=${XLA_FLAGS:-}")
fi
INFO+=(--info "backend=$BACKEND")
log "mode $MODE, backend $BACKEND, preset $PRESET, budget ${BUDGET}s, results in $OUT_DIR"
PT=("${GO_ENV[@]}" "$BIN")

HF=0
HF_NOTE="python3 not found"
if command -v python3 >/dev/null 2>&1; then
  if V=$(python3 -c 'import torch, transformers; print(torch.__version__, transformers.__version__, torch.cuda.is_available())' 2>>"$LOG"); then
    HF=1
    INFO+=(--info "torch_transformers_cuda=$V")
  else
    HF_NOTE="torch/transformers not importable"
  fi
fi
hf_stage() { # like stage, or skipped without torch
  if [ "$HF" = 1 ]; then stage "$@"; else record "$1" skipped 0 0 "" "$HF_NOTE"; fi
}
HFREF=(python3 "$ROOT/scripts/gpu/hf_reference.py")

# ---- Stages ----
# probe: the backend loads and runs the tiny fixture (seconds), before any large model is built.
FIX=$ROOT/models/testdata/qwen2-tiny
F32_ENV=(env NVIDIA_TF32_OVERRIDE=0)
stage probe "$T_PROBE" json "${F32_ENV[@]}" "${PT[@]}" score --model "$FIX/model" --input "$FIX/inputs/left_pad.json" --backend "$BACKEND"

# sample: the in-graph sampler (hash noise, Gumbel-max, top-k/top-p search) and the KV-cache writes
# on the backend draw the pure-Go backend's tokens on the tiny fixture, for every sampler variant.
if needs sample probe; then
  stage sample "$T_PROBE" json "${F32_ENV[@]}" "${PT[@]}" bench sample --model "$FIX/model" --backend "$BACKEND" --seed "$SEED"
fi

# One checkpoint stored in bfloat16 serves every stage: float32 runs load it exactly (upcast). The
# tokenizer is for the trainers (Qwen2.5's keeps the preset's vocabulary of 151,936).
M=$WORK/model
stage init "$T_INIT" text "${PT[@]}" init --preset "$PRESET" --seed "$SEED" --dtype bfloat16 --tokenizer "$TOKENIZER" --out "$M"

VOCAB=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$M/config.json" 2>/dev/null | head -n 1 || true)
if needs inputs init; then
  stage inputs 30 json "$BIN" bench inputs --vocab "${VOCAB:-0}" --rows "$SCORE_ROWS" --len "$SCORE_LEN" --seed "$SEED"
fi

# Log-probs: posttrain and transformers on the same checkpoint, input and device.
for dt in float32 bfloat16; do
  if needs score_go_$dt probe inputs; then
    pre=(env)
    [ $dt = float32 ] && pre=("${F32_ENV[@]}")
    stage score_go_$dt "$T_SCORE" json "${pre[@]}" "${PT[@]}" score --model "$M" --input "$WORK/inputs.out" --compute-dtype $dt --backend "$BACKEND"
  fi
  if needs score_hf_$dt inputs; then
    hf_stage score_hf_$dt "$T_HF_SCORE" json "${HFREF[@]}" score --model "$M" --input "$WORK/inputs.out" --dtype $dt
  fi
done

# Training parity on the tiny fixture (float32): the trainers' AdamW loop (gradient, global-norm
# clipping, HF Trainer's weight-decay groups) and torch.optim.AdamW, step by step.
if needs parity_go probe; then
  stage parity_go "$T_PROBE" json "${F32_ENV[@]}" "${PT[@]}" bench parity --model "$FIX/model" --input "$FIX/inputs/left_pad.json" \
    --backend "$BACKEND" --steps "$PARITY_STEPS"
fi
hf_stage parity_hf "$T_HF_SCORE" json "${F32_ENV[@]}" "${HFREF[@]}" parity --model "$FIX/model" --input "$FIX/inputs/left_pad.json" \
  --steps "$PARITY_STEPS"

# Throughput, each workload on both sides, one after the other.
# Training workloads first (they matter most), decoding last (GRPO already samples at batch 512).
if needs sft_go probe init; then
  stage sft_go "$T_SFT" json "${PT[@]}" bench sft --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
    --batch "$SFT_BATCH" --seq-len "$SFT_LEN" --steps "$SFT_STEPS" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
fi
if needs sft_hf init; then
  hf_stage sft_hf "$T_HF_BENCH" json "${HFREF[@]}" sft --model "$M" --dtype "$BENCH_DTYPE" \
    --batch "$SFT_BATCH" --seq-len "$SFT_LEN" --steps "$SFT_STEPS" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
fi
if needs grpo_go probe init; then
  stage grpo_go "$T_GRPO" json "${PT[@]}" bench grpo --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
    --prompts "$GRPO_PROMPTS" --generations "$GRPO_GENS" --prompt-len "$GRPO_PROMPT" --new-tokens "$GRPO_NEW" \
    --micro-batch "$GRPO_MICRO" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
fi
if needs grpo_hf init; then
  hf_stage grpo_hf "$T_HF_BENCH" json "${HFREF[@]}" grpo --model "$M" --dtype "$BENCH_DTYPE" \
    --prompts "$GRPO_PROMPTS" --generations "$GRPO_GENS" --prompt-len "$GRPO_PROMPT" --new-tokens "$GRPO_NEW" \
    --micro-batch "$GRPO_MICRO" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
fi

# posttrain decodes one batch size per stage (each compiles its own graphs anyway), so a hang at one
# size keeps the others' figures.
for bs in ${DECODE_BATCH//,/ }; do
  if needs decode_go_b$bs probe init; then
    stage decode_go_b$bs "$T_DECODE" json "${PT[@]}" bench decode --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
      --batch "$bs" --prompt-len "$DECODE_PROMPT" --new-tokens "$DECODE_NEW" --seed "$SEED"
  fi
done
if needs decode_hf init; then
  hf_stage decode_hf "$T_HF_BENCH" json "${HFREF[@]}" decode --model "$M" --dtype "$BENCH_DTYPE" \
    --batch "$DECODE_BATCH" --prompt-len "$DECODE_PROMPT" --new-tokens "$DECODE_NEW" --seed "$SEED"
fi

# The real trainers on the same backend (posttrain sft / grpo: data, tokenizer, chat template,
# training loop, checkpoint), budget permitting: their metrics.jsonl is the stage's result.
if needs trainer_data init; then
  stage trainer_data 30 text bash -c '"$1" data mult --kind sft -n 256 -o "$2" && "$1" data mult --kind grpo -n 256 -o "$3"' \
    _ "$BIN" "$WORK/sft.jsonl" "$WORK/grpo.jsonl"
fi
# shellcheck disable=SC2086 # TRAINER_*_ARGS are lists of flags
if needs trainer_sft probe trainer_data; then
  stage trainer_sft "$T_TRAINER" "jsonl:$WORK/run-sft/metrics.jsonl" "${PT[@]}" sft --model "$M" --dataset "$WORK/sft.jsonl" \
    --output-dir "$WORK/run-sft" --logging-steps 1 --save-steps 0 --seed "$SEED" --backend "$BACKEND" $TRAINER_SFT_ARGS
fi
# shellcheck disable=SC2086
if needs trainer_grpo probe trainer_data; then
  stage trainer_grpo "$T_TRAINER" "jsonl:$WORK/run-grpo/metrics.jsonl" "${PT[@]}" grpo --model "$M" --dataset "$WORK/grpo.jsonl" \
    --reward mult_correct --output-dir "$WORK/run-grpo" --logging-steps 1 --save-steps 0 --seed "$SEED" --backend "$BACKEND" \
    $TRAINER_GRPO_ARGS
fi

# ---- Report ----
INFO+=(--info "elapsed_s=$(($(date +%s) - START))")
rc=0
"$BIN" bench report --stages "$STAGES" --out "$OUT_DIR/report.json" "${INFO[@]}" --strict \
  --probe-expected "$FIX/expected/left_pad.float64.json" \
  --tol-probe "$TOL_PROBE" --tol-float32 "$TOL_F32" --tol-bfloat16 "$TOL_BF16" \
  >"$OUT_DIR/summary.txt" 2>>"$LOG" || rc=$?
tail -c 8000000 "$LOG" >"$OUT_DIR/gpu-check.log"
cat "$OUT_DIR/summary.txt"
echo "gpu-check: report $OUT_DIR/report.json (exit $rc)"
exit "$rc"
