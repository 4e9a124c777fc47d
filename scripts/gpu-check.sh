#!/usr/bin/env bash
# gpu-check.sh — prove and measure posttrain's GPU path in one short run on one H200, or rehearse
# the same on a CPU.
#
#   scripts/gpu-check.sh             GPU box: XLA backend through the CUDA PJRT plugin found on the
#                                    machine (JAX's jax_plugins/xla_cuda*/xla_cuda_plugin.so), model
#                                    of exactly Qwen2.5-0.5B's shape, full workloads
#   scripts/gpu-check.sh --rehearse  the GPU branch on a CPU: the same stages, argument lists, bf16
#                                    bench paths and environment, with --backend go, the tiny preset
#                                    and tiny sizes (make gpu-check-cpu)
#   scripts/gpu-check.sh --cpu       the CPU shapes: float32 bench paths, tiny sizes (make gpu-check-cpu)
#
# Options: --cpu, --rehearse, --family NAME (the model family: qwen2, the default, qwen3, llama,
# smollm2, smollm3 or gemma3; also FAMILY=NAME), --bin PATH (default bin/posttrain), --out DIR (default $OUT, else
# out/gpu-check), --budget SECONDS (whole run), --keep (keep the work directory). The family picks
# the preset: on the GPU its real shape (qwen2.5-0.5b, qwen3-0.6b, llama-3.2-1b, smollm2-135m,
# smollm3-3b, gemma-3-270m) with its tokenizer where the repository has one (Qwen's, Llama 3.1's,
# Gemma 3's; SmolLM2 gets the cut-down test tokenizer, which fits its vocabulary; SmolLM3 Llama
# 3.1's, whose 128256 ids it shares), on the CPU its tiny variant (tiny, qwen3-tiny,
# llama-3.2-tiny, smollm2-tiny, smollm3-tiny, gemma-3-tiny). Every size below
# can be set from the environment (PRESET, BACKEND, BENCH_DTYPE, DECODE_BATCH, SFT_BATCH, ...; see
# "Settings"). ONLY=REGEX runs only the stages whose names match (the others are recorded as
# skipped; `backend` and `probe` always run), or a preset: ONLY=@first (correctness: the backend,
# the sampler, log-probs and training parity against transformers), @speed (throughput side by
# side), @trainers (the real sft and grpo commands), @go (every posttrain stage, no PyTorch).
# SITE_PACKAGES=DIR[:DIR] searches those directories for the CUDA plugin instead of python3's
# sys.path; PJRT_CUDA_PLUGIN=/abs/path.so or BACKEND=... skips the search.
#
# It needs a posttrain binary built with cgo (the XLA backend in): `make build`; nothing is
# downloaded (GoMLX's auto-install stays off). The PyTorch + transformers side
# (scripts/gpu/hf_reference.py) runs where `python3 -c 'import torch, transformers'` works and is
# recorded as skipped elsewhere.
#
# Order: `backend` first (plugin path, its PJRT C API version and the client's, the CUDA data
# directory with its nvvm/libdevice, a client created and one small graph compiled with XLA's
# warnings visible), then `probe` (the tiny fixture scored). If either fails, nothing else runs and
# summary.txt says why. Then every posttrain (Go) stage, the real trainers (sft, grpo) first, then
# every PyTorch stage. Each stage runs under its own timeout within the whole run's budget; a
# later stage that fails or times out is recorded and the run goes on (stages that need it are
# skipped). Go stages report their XLA compile time and graph count apart from run time
# (POSTTRAIN_COMPILE_REPORT), and the summary totals them. On a GPU every stage shares one XLA
# autotuning cache and one compiled-kernel cache in the work directory.
#
# Time limits assume XLA compile times on the H200 box (16 cores), not measured yet: a forward
# graph of the 24-layer 0.5B model ~20-40 s, a forward+backward+AdamW graph ~40-90 s, a decode step
# ~10-30 s, the tiny fixture's graphs ~1-2 s each. A stage's limit is its graphs' compile time at
# the high end plus its run time; see T_* below. The default budget (420 s) keeps a first run and a
# second, shorter try within 15 minutes of GPU time.
#
# Results: $OUT/report.json (every stage's status, compile and run time and JSON output, the
# log-prob check, throughput side by side), $OUT/summary.txt (printed at the end) and
# $OUT/gpu-check.log (all stderr). Exit status: 0 when every stage that ran passed, 1 otherwise,
# 2 on a usage error.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MODE=gpu
REHEARSE=0
BIN=${POSTTRAIN_BIN:-$ROOT/bin/posttrain}
OUT_DIR=${OUT:-$ROOT/out/gpu-check}
BUDGET=${BUDGET:-}
KEEP=${KEEP:-0}
FAMILY=${FAMILY:-qwen2}
while [ $# -gt 0 ]; do
  case $1 in
    --cpu) MODE=cpu ;;
    --family) FAMILY=$2; shift ;;
    --gpu) MODE=gpu ;;
    --rehearse) MODE=gpu; REHEARSE=1 ;;
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
# make build leaves bin/posttrain.gz beside the binary: the compressed copy is what travels to a
# GPU box within the 64 MiB a copy may hold, and is unpacked here when the binary is missing or
# older than it.
if [ -f "$BIN.gz" ] && { [ ! -x "$BIN" ] || [ "$BIN.gz" -nt "$BIN" ]; }; then
  gzip -dc "$BIN.gz" > "$BIN.tmp" && chmod +x "$BIN.tmp" && mv "$BIN.tmp" "$BIN"
fi
if [ ! -x "$BIN" ]; then
  echo "gpu-check: no posttrain binary at $BIN; build it first: make build" >&2
  exit 2
fi
case ${ONLY:-} in
  "") ;;
  @first) ONLY='^(sample|init|inputs|score_.*|parity_.*)$' ;;
  @speed) ONLY='^(init|sft_.*|grpo_.*|decode_.*)$' ;;
  @trainers) ONLY='^(init|trainer_.*)$' ;;
  @go) ONLY='^(sample|init|inputs|.*_go.*|trainer_.*)$' ;;
  @*) echo "gpu-check: unknown ONLY preset ${ONLY} (valid: @first, @speed, @trainers, @go, or a regular expression)" >&2; exit 2 ;;
esac

# ---- The family's presets and tokenizer (PRESET / TOKENIZER in the environment override them) ----
case $FAMILY in
  qwen2) TINY_PRESET=tiny; REAL_PRESET=qwen2.5-0.5b; REAL_TOKENIZER=$ROOT/data/tokenizer/testdata ;;
  qwen3) TINY_PRESET=qwen3-tiny; REAL_PRESET=qwen3-0.6b; REAL_TOKENIZER=$ROOT/data/tokenizer/testdata ;;
  llama) TINY_PRESET=llama-3.2-tiny; REAL_PRESET=llama-3.2-1b; REAL_TOKENIZER=$ROOT/data/tokenizer/testdata/llama3 ;;
  smollm2) TINY_PRESET=smollm2-tiny; REAL_PRESET=smollm2-135m; REAL_TOKENIZER=$ROOT/models/tinymodel/files ;;
  smollm3) TINY_PRESET=smollm3-tiny; REAL_PRESET=smollm3-3b; REAL_TOKENIZER=$ROOT/data/tokenizer/testdata/llama3 ;;
  gemma3) TINY_PRESET=gemma-3-tiny; REAL_PRESET=gemma-3-270m; REAL_TOKENIZER=$ROOT/data/tokenizer/testdata/gemma3 ;;
  *) echo "gpu-check: unknown --family ${FAMILY} (valid: qwen2, qwen3, llama, smollm2, smollm3, gemma3)" >&2; exit 2 ;;
esac

# ---- Settings (environment overrides the mode's default) ----
# The stages' argument lists below are the same in every mode; only these values differ.
: "${DECODE_STEPS_PER_CALL:=8}"
if [ "$MODE" = cpu ]; then
  : "${PRESET:=$TINY_PRESET}" "${BACKEND:=go}" "${BENCH_DTYPE:=float32}" "${BUDGET:=300}"
  : "${SCORE_ROWS:=4}" "${SCORE_LEN:=32}"
  : "${DECODE_BATCH:=1,4}" "${DECODE_PROMPT:=8}" "${DECODE_NEW:=8}"
  : "${SFT_BATCH:=2}" "${SFT_LEN:=32}" "${SFT_STEPS:=2}"
  : "${GRPO_PROMPTS:=2}" "${GRPO_GENS:=4}" "${GRPO_PROMPT:=8}" "${GRPO_NEW:=8}" "${GRPO_MICRO:=4}"
  : "${PEAK_TFLOPS:=0}" "${TOL_PROBE:=1e-4}" "${TOL_F32:=2e-3}" "${TOL_BF16:=0.15}"
  : "${TOKENIZER:=$ROOT/models/tinymodel/files}"
  : "${TRAIN_DTYPE_FLAG:=}" "${TRAIN_SFT_STEPS:=3}" "${TRAIN_SFT_BATCH:=8}" "${TRAIN_SFT_LEN:=256}"
  : "${TRAIN_GRPO_STEPS:=2}" "${TRAIN_GRPO_BATCH:=8}" "${TRAIN_GRPO_GA:=1}" "${TRAIN_GRPO_GENS:=4}" "${TRAIN_GRPO_NEW:=8}"
  : "${T_BACKEND:=60}" "${T_PROBE:=60}" "${T_SAMPLE:=60}" "${T_INIT:=60}" "${T_SCORE:=60}" "${T_PARITY:=60}" "${T_SFT:=60}" "${T_GRPO:=60}"
  : "${T_DECODE:=60}" "${T_TRAINER:=60}" "${T_HF_SCORE:=120}" "${T_HF_BENCH:=120}" "${T_MEMORY:=60}"
else
  if [ "$REHEARSE" = 1 ]; then # the GPU branch at tiny sizes on the pure-Go backend
    : "${PRESET:=$TINY_PRESET}" "${BACKEND:=go}" "${BUDGET:=300}" "${TOKENIZER:=$ROOT/models/tinymodel/files}"
    : "${SCORE_ROWS:=4}" "${SCORE_LEN:=32}"
    : "${DECODE_BATCH:=1,4}" "${DECODE_PROMPT:=8}" "${DECODE_NEW:=8}"
    : "${SFT_BATCH:=2}" "${SFT_LEN:=32}" "${SFT_STEPS:=2}"
    : "${GRPO_PROMPTS:=2}" "${GRPO_GENS:=4}" "${GRPO_PROMPT:=8}" "${GRPO_NEW:=8}" "${GRPO_MICRO:=4}"
    : "${TRAIN_SFT_STEPS:=2}" "${TRAIN_SFT_BATCH:=4}" "${TRAIN_SFT_LEN:=256}"
    : "${TRAIN_GRPO_STEPS:=2}" "${TRAIN_GRPO_BATCH:=4}" "${TRAIN_GRPO_GA:=2}" "${TRAIN_GRPO_GENS:=4}" "${TRAIN_GRPO_NEW:=8}"
  fi
  : "${PRESET:=$REAL_PRESET}" "${BACKEND:=}" "${BENCH_DTYPE:=bfloat16}" "${BUDGET:=420}"
  : "${SCORE_ROWS:=4}" "${SCORE_LEN:=128}"
  : "${DECODE_BATCH:=1,64,256}" "${DECODE_PROMPT:=64}" "${DECODE_NEW:=64}"
  : "${SFT_BATCH:=8}" "${SFT_LEN:=512}" "${SFT_STEPS:=3}"
  : "${GRPO_PROMPTS:=64}" "${GRPO_GENS:=8}" "${GRPO_PROMPT:=64}" "${GRPO_NEW:=64}" "${GRPO_MICRO:=64}"
  # H200 dense bf16 matrix product peak (TFLOP/s) that the MFU figures divide by; override with PEAK_TFLOPS.
  if [ "$BENCH_DTYPE" = bfloat16 ] && [ "$REHEARSE" = 0 ]; then : "${PEAK_TFLOPS:=790}"; else : "${PEAK_TFLOPS:=0}"; fi
  # XLA may run float32 matrix products in TF32 on tensor cores (~1e-3 relative) unless the NVIDIA
  # libraries honour NVIDIA_TF32_OVERRIDE=0 (set for the float32 checks below): tolerances allow it,
  # and the report's max |Δ| shows which one ran (~1e-6 full float32, ~1e-3 TF32).
  : "${TOL_PROBE:=2e-3}" "${TOL_F32:=5e-3}" "${TOL_BF16:=0.15}"
  : "${TOKENIZER:=$REAL_TOKENIZER}"
  # The real trainers, both in bf16 with float32 masters; GRPO at 64 prompts × 8 completions × 64
  # tokens per step in 8 accumulated micro-batches of 64.
  : "${TRAIN_DTYPE_FLAG:=--bf16}" "${TRAIN_SFT_STEPS:=5}" "${TRAIN_SFT_BATCH:=8}" "${TRAIN_SFT_LEN:=512}"
  : "${TRAIN_GRPO_STEPS:=2}" "${TRAIN_GRPO_BATCH:=64}" "${TRAIN_GRPO_GA:=8}" "${TRAIN_GRPO_GENS:=8}" "${TRAIN_GRPO_NEW:=64}"
  # Limits: compile time at the high end of the assumption above plus run time (see the header).
  : "${T_BACKEND:=60}" "${T_PROBE:=60}" "${T_SAMPLE:=120}" "${T_INIT:=60}" "${T_SCORE:=90}" "${T_PARITY:=60}"
  : "${T_SFT:=180}" "${T_GRPO:=240}" "${T_DECODE:=300}" "${T_TRAINER:=240}" "${T_HF_SCORE:=120}" "${T_HF_BENCH:=150}"
  : "${T_MEMORY:=120}"
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
MODE_NAME=$MODE
[ "$REHEARSE" = 1 ] && MODE_NAME=gpu-rehearsal
INFO=(--info "mode=$MODE_NAME" --info "family=$FAMILY" --info "preset=$PRESET" --info "bench_dtype=$BENCH_DTYPE" --info "seed=$SEED"
      --info "posttrain=$("$BIN" --version 2>/dev/null | head -1)" --info "host=$(hostname 2>/dev/null || echo unknown)"
      --info "started_utc=$(date -u +%Y-%m-%dT%H:%M:%SZ)" --info "budget_s=$BUDGET" --info "only=${ONLY:-all}")
[ -d "$ROOT/.git" ] && INFO+=(--info "commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)")

log() { echo "gpu-check: $*" | tee -a "$LOG" >&2; }

# record NAME STATUS RC SECONDS RESULT NOTE [COMPILE_FILE] — one JSON line per stage (NOTE: quotes
# are replaced); COMPILE_FILE is the stage's POSTTRAIN_COMPILE_REPORT ({graphs, compile_s, wall_s}).
record() {
  local note=${6//[\"\\]/\'} compile=null graphs=null
  note=${note//$'\n'/ }
  note=${note//$'\t'/ }
  if [ -n "${7:-}" ] && [ -s "$7" ]; then
    compile=$(sed -n 's/.*"compile_s": *\([0-9.]*\).*/\1/p' "$7")
    graphs=$(sed -n 's/.*"graphs": *\([0-9]*\).*/\1/p' "$7")
    : "${compile:=null}" "${graphs:=null}"
  fi
  printf '{"name":"%s","status":"%s","rc":%d,"seconds":%s,"compile_s":%s,"graphs":%s,"result":"%s","note":"%s"}\n' \
    "$1" "$2" "$3" "$4" "$compile" "$graphs" "$5" "$note" >>"$STAGES"
  STATUS[$1]=$2
  local c=""
  [ "$compile" != null ] && c=" (compile ${compile}s, ${graphs} graphs)"
  printf 'gpu-check: %-18s %-8s %6ss%s %s\n' "$1" "$2" "$4" "$c" "$6" >&2
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
# e.g. a trainer's metrics.jsonl) is; text: no result. posttrain writes its compile time to
# $WORK/NAME.compile.json.
stage() {
  local name=$1 limit=$2 kind=$3 left rc=0 t0 t1 secs result=""
  shift 3
  if [ -n "${ONLY:-}" ] && [ "$name" != backend ] && [ "$name" != probe ] && ! [[ $name =~ $ONLY ]]; then
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
  local creport=$WORK/$name.compile.json
  rm -f "$creport"
  t0=$(date +%s.%N)
  POSTTRAIN_COMPILE_REPORT=$creport timeout -k 15 "$limit" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || rc=$?
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
    record "$name" ok 0 "$secs" "$result" "" "$creport"
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    record "$name" timeout "$rc" "$secs" "" "no result within ${limit}s" "$creport"
    tail -n 5 "$WORK/$name.err" | sed 's/^/    /' >&2
  else
    local last
    last=$(grep -v '^[[:space:]]*$' "$WORK/$name.err" | tail -n 1 || true)
    [ "${#last}" -gt 400 ] && last="${last:0:180} … ${last: -200}"
    record "$name" failed "$rc" "$secs" "" "$last" "$creport"
    tail -n 5 "$WORK/$name.err" | sed 's/^/    /' >&2
  fi
}

# ---- Backend: on a GPU box, the CUDA PJRT plugin that JAX installed, by absolute path ----
export GOMLX_NO_AUTO_INSTALL=1 # never download a plugin during the check (posttrain's default too)
unset POSTTRAIN_XLA_AUTO_INSTALL
# XLA's warnings (libdevice or ptxas not found, slow compilation, ...) stay visible; GoMLX would set 2.
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-1}
GO_ENV=(env)

# site_dirs prints the directories to search for jax_plugins/ and nvidia/ (SITE_PACKAGES, else
# python3's sys.path), one per line.
site_dirs() {
  if [ -n "${SITE_PACKAGES:-}" ]; then
    tr ':' '\n' <<<"$SITE_PACKAGES"
  elif command -v python3 >/dev/null 2>&1; then
    python3 -c 'import sys; print("\n".join(d for d in sys.path if d))' 2>/dev/null || true
  fi
}
find_cuda_plugin() {
  if [ -n "${PJRT_CUDA_PLUGIN:-}" ]; then echo "$PJRT_CUDA_PLUGIN"; return; fi
  local d p=""
  while IFS= read -r d; do
    for f in "$d"/jax_plugins/xla_cuda*/xla_cuda_plugin.so; do [ -f "$f" ] && p="$p$f"$'\n'; done
  done < <(site_dirs)
  if [ -z "$p" ] && [ -z "${SITE_PACKAGES:-}" ]; then
    p=$(find /opt /usr /root /home -path '*jax_plugins/xla_cuda*/xla_cuda_plugin.so' -print 2>/dev/null || true)
  fi
  sort -r <<<"$p" | grep -v '^$' | head -n 1 || true # xla_cuda13 before xla_cuda12
}
# find_cuda_dir SITE — the directory holding nvvm/libdevice/libdevice*.bc that XLA needs for
# --xla_gpu_cuda_data_dir: pip's nvidia-cuda-nvcc, any nvidia/* wheel, $CUDA_HOME, /usr/local/cuda.
find_cuda_dir() {
  local c
  for c in "$1/nvidia/cuda_nvcc" "$1"/nvidia/* "${CUDA_HOME:-}" "${CUDA_PATH:-}" /usr/local/cuda /usr/local/cuda-*; do
    [ -n "$c" ] || continue
    if compgen -G "$c/nvvm/libdevice/libdevice*.bc" >/dev/null; then echo "$c"; return; fi
  done
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
      INFO+=(--info "plugin=$PLUGIN")
      log "CUDA PJRT plugin: $PLUGIN"
      # go-xla v0.1.4 would set XLA_FLAGS to a hard-coded /home/janpf/... CUDA directory; an
      # explicit --xla_gpu_cuda_data_dir (the directory holding nvvm/libdevice) is left alone.
      CUDA_DIR=$(find_cuda_dir "$SITE")
      if [ -n "$CUDA_DIR" ]; then
        case "${XLA_FLAGS:-}" in
          *--xla_gpu_cuda_data_dir*) ;;
          *) export XLA_FLAGS="--xla_gpu_cuda_data_dir=$CUDA_DIR${XLA_FLAGS:+ $XLA_FLAGS}" ;;
        esac
        LIBDEVICE=$(cd "$CUDA_DIR/nvvm/libdevice" && ls -l -- * 2>&1 | awk '{ print $NF " (" $5 " bytes)" }' | paste -sd, -)
        INFO+=(--info "cuda_data_dir=$CUDA_DIR" --info "libdevice=$LIBDEVICE")
        log "CUDA data directory: $CUDA_DIR; ls nvvm/libdevice:"
        ls -l "$CUDA_DIR/nvvm/libdevice" 2>&1 | tee -a "$LOG" >&2
      else
        INFO+=(--info "cuda_data_dir=not found (no nvvm/libdevice under $SITE/nvidia, \$CUDA_HOME or /usr/local/cuda)")
        log "no CUDA data directory with nvvm/libdevice found: XLA falls back to its own search, and graphs with exp/log/tanh may fail to compile"
      fi
      PTXAS=""
      for c in "$SITE"/nvidia/*/bin/ptxas "${CUDA_DIR:-/nonexistent}/bin/ptxas" "$(command -v ptxas 2>/dev/null || true)"; do
        if [ -n "$c" ] && [ -x "$c" ]; then PTXAS=$c; break; fi
      done
      if [ -n "$PTXAS" ]; then
        export PATH="$(dirname "$PTXAS"):$PATH"
        INFO+=(--info "ptxas=$PTXAS ($("$PTXAS" --version 2>/dev/null | tail -n 1 || echo 'no version'))")
      else
        INFO+=(--info "ptxas=not found (XLA then compiles PTX through the driver)")
      fi
      # The NVIDIA libraries of the pip wheels (the plugin's RPATH should find them; this is a fallback).
      LIBS=$(find "$SITE/nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | paste -sd: - || true)
      [ -n "$LIBS" ] && GO_ENV=(env "LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
      # One autotuning cache and one compiled-kernel cache for every stage: each stage is its own
      # process, and without them each would autotune and assemble the same 0.5B kernels again.
      mkdir -p "$WORK/xla-autotune"
      export XLA_FLAGS="${XLA_FLAGS:+$XLA_FLAGS }--xla_gpu_per_fusion_autotune_cache_dir=$WORK/xla-autotune --xla_gpu_kernel_cache_file=$WORK/xla-kernels.bin"
    else
      log "no CUDA PJRT plugin found (jax_plugins/xla_cuda*/xla_cuda_plugin.so); set PJRT_CUDA_PLUGIN or BACKEND"
      INFO+=(--info "plugin=not found")
      BACKEND="xla:cuda" # fails at once in the backend stage, naming what was searched
    fi
  fi
  INFO+=(--info "xla_flags=${XLA_FLAGS:-}")
fi
INFO+=(--info "backend=$BACKEND" --info "tf_cpp_min_log_level=$TF_CPP_MIN_LOG_LEVEL")
log "mode $MODE_NAME, backend $BACKEND, preset $PRESET, budget ${BUDGET}s, results in $OUT_DIR"
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
FIX=$ROOT/models/testdata/qwen2-tiny
F32_ENV=(env NVIDIA_TF32_OVERRIDE=0)
M=$WORK/model

# ---- First: the backend and the probe; nothing else runs unless both pass ----
# backend: plugin and API versions, a client, its devices, one small graph (all XLA logging shown).
stage backend "$T_BACKEND" json env TF_CPP_MIN_LOG_LEVEL=0 "${PT[@]}" bench backend --backend "$BACKEND"
STOPPED=""
if [ "${STATUS[backend]}" = ok ]; then
  # probe: the backend loads and scores the tiny fixture (seconds), before any large model is built.
  stage probe "$T_PROBE" json "${F32_ENV[@]}" "${PT[@]}" score --model "$FIX/model" --input "$FIX/inputs/left_pad.json" --backend "$BACKEND"
  [ "${STATUS[probe]}" = ok ] || STOPPED="probe ${STATUS[probe]}: $(grep -v '^[[:space:]]*$' "$WORK/probe.err" 2>/dev/null | tail -n 1 | cut -c1-400)"
else
  STOPPED="backend ${STATUS[backend]}: $(grep -v '^[[:space:]]*$' "$WORK/backend.err" 2>/dev/null | tail -n 1 | cut -c1-400)"
fi

if [ -z "$STOPPED" ]; then
  # ---- posttrain (Go) stages ----
  # sample: the in-graph sampler (hash noise, Gumbel-max, top-k/top-p search) and the KV-cache
  # writes on the backend draw the pure-Go backend's tokens on the tiny fixture, for every variant.
  stage sample "$T_SAMPLE" json "${F32_ENV[@]}" "${PT[@]}" bench sample --model "$FIX/model" --backend "$BACKEND" --seed "$SEED"

  # One checkpoint stored in bfloat16 serves every stage: float32 runs load it exactly (upcast). The
  # tokenizer is for the trainers (Qwen2.5's keeps the preset's vocabulary of 151,936).
  stage init "$T_INIT" text "${PT[@]}" init --preset "$PRESET" --seed "$SEED" --dtype bfloat16 --tokenizer "$TOKENIZER" --out "$M" --overwrite
  VOCAB=$(sed -n 's/.*"vocab_size": *\([0-9]*\).*/\1/p' "$M/config.json" 2>/dev/null | head -n 1 || true)
  # The real trainers first, on the same backend (posttrain sft / grpo: data, tokenizer, chat
  # template, training loop, checkpoint): what a user runs, so what the budget must reach above
  # all; their metrics.jsonl is the stage's result.
  if needs trainer_data init; then
    stage trainer_data 30 text bash -c '"$1" data mult --kind sft -n 256 -o "$2" && "$1" data mult --kind grpo -n 256 -o "$3"' \
      _ "$BIN" "$WORK/sft.jsonl" "$WORK/grpo.jsonl"
  fi
  # shellcheck disable=SC2086 # TRAIN_DTYPE_FLAG is empty or one flag
  if needs trainer_sft trainer_data; then
    stage trainer_sft "$T_TRAINER" "jsonl:$WORK/run-sft/metrics.jsonl" "${PT[@]}" sft --model "$M" --dataset "$WORK/sft.jsonl" \
      --output-dir "$WORK/run-sft" --logging-steps 1 --save-steps 0 --seed "$SEED" --backend "$BACKEND" $TRAIN_DTYPE_FLAG \
      --max-steps "$TRAIN_SFT_STEPS" --per-device-train-batch-size "$TRAIN_SFT_BATCH" --max-length "$TRAIN_SFT_LEN"
  fi
  # shellcheck disable=SC2086
  if needs trainer_grpo trainer_data; then
    stage trainer_grpo "$T_TRAINER" "jsonl:$WORK/run-grpo/metrics.jsonl" "${PT[@]}" grpo --model "$M" --dataset "$WORK/grpo.jsonl" \
      --reward mult_correct --output-dir "$WORK/run-grpo" --logging-steps 1 --save-steps 0 --seed "$SEED" --backend "$BACKEND" \
      $TRAIN_DTYPE_FLAG --max-steps "$TRAIN_GRPO_STEPS" --per-device-train-batch-size "$TRAIN_GRPO_BATCH" \
      --gradient-accumulation-steps "$TRAIN_GRPO_GA" --num-generations "$TRAIN_GRPO_GENS" --max-completion-length "$TRAIN_GRPO_NEW"
  fi

  if needs inputs init; then
    stage inputs 30 json "$BIN" bench inputs --vocab "${VOCAB:-0}" --rows "$SCORE_ROWS" --len "$SCORE_LEN" --seed "$SEED"
  fi
  # Log-probs on the same checkpoint and input as transformers (its side runs after the Go stages).
  for dt in float32 bfloat16; do
    if needs score_go_$dt inputs; then
      pre=(env)
      [ $dt = float32 ] && pre=("${F32_ENV[@]}")
      stage score_go_$dt "$T_SCORE" json "${pre[@]}" "${PT[@]}" score --model "$M" --input "$WORK/inputs.out" --compute-dtype $dt --backend "$BACKEND"
    fi
  done
  # Training parity on the tiny fixture (float32): the trainers' AdamW loop (gradient, global-norm
  # clipping, HF Trainer's weight-decay groups), step by step against torch.optim.AdamW.
  stage parity_go "$T_PARITY" json "${F32_ENV[@]}" "${PT[@]}" bench parity --model "$FIX/model" --input "$FIX/inputs/left_pad.json" \
    --backend "$BACKEND" --steps "$PARITY_STEPS"
  # Throughput: training workloads first (they matter most), decoding last (GRPO already samples at
  # batch 512), every decode batch size in one process (its weights loaded once, one client).
  if needs sft_go init; then
    stage sft_go "$T_SFT" json "${PT[@]}" bench sft --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
      --batch "$SFT_BATCH" --seq-len "$SFT_LEN" --steps "$SFT_STEPS" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
  fi
  if needs grpo_go init; then
    stage grpo_go "$T_GRPO" json "${PT[@]}" bench grpo --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
      --prompts "$GRPO_PROMPTS" --generations "$GRPO_GENS" --prompt-len "$GRPO_PROMPT" --new-tokens "$GRPO_NEW" \
      --micro-batch "$GRPO_MICRO" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
  fi
  if needs decode_go init; then
    stage decode_go "$T_DECODE" json "${PT[@]}" bench decode --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
      --batch "$DECODE_BATCH" --prompt-len "$DECODE_PROMPT" --new-tokens "$DECODE_NEW" --seed "$SEED"
  fi
  # The largest decode batch again with DECODE_STEPS_PER_CALL decode steps per execution (the steps
  # unrolled in one executable, stop tokens checked after each call; the same tokens): what the
  # host's round trips cost a step on this device, beside decode_go's one step per execution.
  if needs decode_go_steps decode_go; then
    stage decode_go_steps "$T_DECODE" json "${PT[@]}" bench decode --model "$M" --dtype "$BENCH_DTYPE" --backend "$BACKEND" \
      --batch "${DECODE_BATCH##*,}" --prompt-len "$DECODE_PROMPT" --new-tokens "$DECODE_NEW" --seed "$SEED" \
      --decode-steps-per-call "$DECODE_STEPS_PER_CALL"
  fi
  # The memory plan of an SFT step at sft_go's shape, as this backend's XLA compiles it (shapes
  # only, nothing allocated; docs/gpu.md "Memory of a training step"): on a GPU, the GPU
  # compiler's plan beside the CPU compiler's in that table. The pure-Go backend has no plans.
  if [ "$BACKEND" = go ]; then
    record memory_go skipped 0 0 "" "the pure-Go backend has no memory plans"
  else
    stage memory_go "$T_MEMORY" json "${PT[@]}" bench memory --preset "$PRESET" --method sft --dtype "$BENCH_DTYPE" \
      --backend "$BACKEND" --batch "$SFT_BATCH" --seq-len "$SFT_LEN" --json
  fi
  # Data parallel (docs/distributed.md): on a box with more than one device, the SFT and GRPO runs
  # again with --devices over all of them, per_device_train_batch_size unchanged (so N times the
  # global batch; GRPO's generation and scoring split too): the summary divides their train
  # speeds by N (data_parallel_devices) for the per-device throughput, beside trainer_sft's and
  # trainer_grpo's one-device figures. On one device the stages say so.
  # The list ends at a line holding only "]" (a device entry such as "cpu:0 [processId=0]" has one too).
  NDEV=$(sed -n '/"devices": \[/,/^ *\],\?$/p' "$WORK/backend.out" 2>/dev/null | grep -c '"' || true)
  NDEV=$((NDEV > 1 ? NDEV - 1 : 1))
  INFO+=(--info "data_parallel_devices=$NDEV")
  # shellcheck disable=SC2086
  if [ "$NDEV" -lt 2 ]; then
    record trainer_sft_dp skipped 0 0 "" "one device: data parallel not run"
    record trainer_grpo_dp skipped 0 0 "" "one device: data parallel not run"
  else
    if needs trainer_sft_dp trainer_data; then
      stage trainer_sft_dp "$T_TRAINER" "jsonl:$WORK/run-sft-dp/metrics.jsonl" "${PT[@]}" sft --model "$M" --dataset "$WORK/sft.jsonl" \
        --output-dir "$WORK/run-sft-dp" --logging-steps 1 --save-steps 0 --seed "$SEED" --backend "$BACKEND" $TRAIN_DTYPE_FLAG \
        --max-steps "$TRAIN_SFT_STEPS" --per-device-train-batch-size "$TRAIN_SFT_BATCH" --max-length "$TRAIN_SFT_LEN" --devices "$NDEV"
    fi
    if needs trainer_grpo_dp trainer_data; then
      stage trainer_grpo_dp "$T_TRAINER" "jsonl:$WORK/run-grpo-dp/metrics.jsonl" "${PT[@]}" grpo --model "$M" --dataset "$WORK/grpo.jsonl" \
        --reward mult_correct --output-dir "$WORK/run-grpo-dp" --logging-steps 1 --save-steps 0 --seed "$SEED" --backend "$BACKEND" \
        $TRAIN_DTYPE_FLAG --max-steps "$TRAIN_GRPO_STEPS" --per-device-train-batch-size "$TRAIN_GRPO_BATCH" \
        --gradient-accumulation-steps "$TRAIN_GRPO_GA" --num-generations "$TRAIN_GRPO_GENS" --max-completion-length "$TRAIN_GRPO_NEW" \
        --devices "$NDEV"
    fi
  fi

  # ---- PyTorch + transformers stages (the same workloads, for the checks and the ratios) ----
  for dt in float32 bfloat16; do
    if needs score_hf_$dt inputs; then
      pre=(env)
      [ $dt = float32 ] && pre=("${F32_ENV[@]}")
      hf_stage score_hf_$dt "$T_HF_SCORE" json "${pre[@]}" "${HFREF[@]}" score --model "$M" --input "$WORK/inputs.out" --dtype $dt
    fi
  done
  hf_stage parity_hf "$T_HF_SCORE" json "${F32_ENV[@]}" "${HFREF[@]}" parity --model "$FIX/model" --input "$FIX/inputs/left_pad.json" \
    --steps "$PARITY_STEPS"
  if needs sft_hf init; then
    hf_stage sft_hf "$T_HF_BENCH" json "${HFREF[@]}" sft --model "$M" --dtype "$BENCH_DTYPE" \
      --batch "$SFT_BATCH" --seq-len "$SFT_LEN" --steps "$SFT_STEPS" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
  fi
  if needs grpo_hf init; then
    hf_stage grpo_hf "$T_HF_BENCH" json "${HFREF[@]}" grpo --model "$M" --dtype "$BENCH_DTYPE" \
      --prompts "$GRPO_PROMPTS" --generations "$GRPO_GENS" --prompt-len "$GRPO_PROMPT" --new-tokens "$GRPO_NEW" \
      --micro-batch "$GRPO_MICRO" --peak-tflops "$PEAK_TFLOPS" --seed "$SEED"
  fi
  if needs decode_hf init; then
    hf_stage decode_hf "$T_HF_BENCH" json "${HFREF[@]}" decode --model "$M" --dtype "$BENCH_DTYPE" \
      --batch "$DECODE_BATCH" --prompt-len "$DECODE_PROMPT" --new-tokens "$DECODE_NEW" --seed "$SEED"
  fi
else
  log "stopped: $STOPPED"
fi

# ---- Report ----
INFO+=(--info "elapsed_s=$(($(date +%s) - START))")
rc=0
"$BIN" bench report --stages "$STAGES" --out "$OUT_DIR/report.json" "${INFO[@]}" --strict --stopped "$STOPPED" \
  --probe-expected "$FIX/expected/left_pad.float64.json" \
  --tol-probe "$TOL_PROBE" --tol-float32 "$TOL_F32" --tol-bfloat16 "$TOL_BF16" \
  >"$OUT_DIR/summary.txt" 2>>"$LOG" || rc=$?
tail -c 8000000 "$LOG" >"$OUT_DIR/gpu-check.log"
cat "$OUT_DIR/summary.txt"
echo "gpu-check: report $OUT_DIR/report.json (exit $rc)"
exit "$rc"
