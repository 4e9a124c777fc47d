#!/usr/bin/env bash
# gpu-check-test.sh BIN — scripts/gpu-check.sh exercised on a CPU (make gpu-check-cpu), so that the
# GPU run cannot fail on something a CPU could have caught:
#
#   1. --cpu: the CPU shapes end to end, for every model family's tiny preset (--family), and the
#      data-parallel stages on XLA's CPU devices;
#   2. --rehearse: the GPU branch itself (its stage order, argument lists, bf16 bench paths and
#      environment) at tiny sizes on the pure-Go backend;
#   3. fake plugin trees in a temporary site-packages: the discovery of JAX's CUDA plugin, the CUDA
#      data directory with nvvm/libdevice, ptxas and XLA_FLAGS reach the report, and a plugin that
#      cannot load, one of another PJRT C API major version, or none at all stops the run at the
#      first stage with the reason in summary.txt and exit status 1;
#   4. what travels to the GPU box (the working tree and bin/posttrain) fits in 64 MiB.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/bin/posttrain}
case $BIN in /*) ;; *) BIN=$PWD/$BIN ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
fail() { echo "gpu-check-test: FAIL: $*" >&2; fails=$((fails + 1)); }
# expect FILE TEXT... — every TEXT occurs in FILE (fixed strings).
expect() {
  local f=$1 s
  shift
  for s in "$@"; do grep -qF -- "$s" "$f" || fail "$(basename "$(dirname "$f")")/$(basename "$f") lacks: $s"; done
}
# run_check NAME EXPECTED_RC ARGS... — runs the script with ARGS, output in $T/NAME.
run_check() {
  local name=$1 want=$2 rc=0
  shift 2
  "$@" >"$T/$name.stdout" 2>"$T/$name.stderr" || rc=$?
  if [ "$rc" != "$want" ]; then
    fail "$name: exit status $rc, want $want"
    tail -n 30 "$T/$name.stderr" >&2
  fi
}
GC=(bash "$ROOT/scripts/gpu-check.sh" --bin "$BIN")

# 1. The CPU shapes.
run_check cpu 0 "${GC[@]}" --cpu --out "$T/cpu"
expect "$T/cpu/summary.txt" "mode: cpu" "result: ok" "backend            ok" "compile " "graphs), run" "trainer_grpo       ok" "trainer_sft_dp     skipped" "one device: data parallel not run"

# 1a. The data-parallel stages on XLA's 4 CPU devices (the plugin make xla-cpu installs; always in
# CI, where .ci/run installs it): trainer_sft_dp and trainer_grpo_dp run with --devices 4 and the
# summary gives their per-device speeds.
if [ -f "$ROOT/bin/xla/pjrt_c_api_cpu_plugin.so" ] || [ "${CI:-}" = true ]; then
  DP_DONE=", data parallel on 4 CPU devices"
  run_check cpu-devices 0 env BACKEND=xla:cpu ONLY=@trainers "${GC[@]}" --cpu --out "$T/cpu-devices"
  expect "$T/cpu-devices/summary.txt" "result: ok" "trainer_sft_dp     ok" "trainer_grpo_dp    ok" \
  "per device (4 devices): tokens_per_s/generation" "per device (4 devices): num_tokens / (stage − compile s)"
  grep -q -- 'grpo .*--devices 4' "$T/cpu-devices/gpu-check.log" || fail "cpu-devices: GRPO did not run with --devices 4"
else
  echo "gpu-check-test: 1a skipped: XLA's CPU plugin is not installed (make xla-cpu)"
fi

# 1b. Every other model family's tiny preset on the CPU (--family).
for fam in qwen3:qwen3-tiny llama:llama-3.2-tiny smollm2:smollm2-tiny smollm3:smollm3-tiny gemma3:gemma-3-tiny; do
  run_check "cpu-${fam%%:*}" 0 "${GC[@]}" --cpu --family "${fam%%:*}" --out "$T/cpu-${fam%%:*}"
  expect "$T/cpu-${fam%%:*}/summary.txt" "family: ${fam%%:*}" "preset: ${fam#*:}" "result: ok" "trainer_sft        ok" "trainer_grpo       ok"
done
run_check family-unknown 2 "${GC[@]}" --cpu --family gemma2 --out "$T/family-unknown"
expect "$T/family-unknown.stderr" "unknown --family gemma2 (valid: qwen2, qwen3, llama, smollm2, smollm3, gemma3)"

# 2. The GPU branch at tiny sizes: bf16 benches, the trainers with --bf16, XLA logging visible.
run_check rehearse 0 "${GC[@]}" --rehearse --out "$T/rehearse"
expect "$T/rehearse/summary.txt" "mode: gpu-rehearsal" "bench_dtype: bfloat16" "tf_cpp_min_log_level: 1" "result: ok" \
  "sft_go             ok" "grpo_go            ok" "trainer_sft        ok" "trainer_grpo       ok"
grep -q -- '--bf16 --max-steps' "$T/rehearse/gpu-check.log" || fail "rehearse: the trainers did not run with --bf16"
grep -q -- 'bench grpo .*--dtype bfloat16' "$T/rehearse/gpu-check.log" || fail "rehearse: the GRPO bench did not run in bfloat16"

# 3. Fake plugin trees (GPU mode, no GPU here: every run must stop at the backend stage).
fake_site() { # fake_site DIR PLUGIN_SOURCE — JAX's layout with the given plugin file
  mkdir -p "$1/jax_plugins/xla_cuda13" "$1/nvidia/cuda_nvcc/nvvm/libdevice" "$1/nvidia/cuda_nvcc/bin"
  cp "$2" "$1/jax_plugins/xla_cuda13/xla_cuda_plugin.so"
  printf 'BC\xc0\xde fake libdevice\n' >"$1/nvidia/cuda_nvcc/nvvm/libdevice/libdevice.10.bc"
  printf '#!/bin/sh\necho "ptxas: NVIDIA (R) Ptx optimizing assembler"\necho "Cuda compilation tools, release 13.0, V13.0.88"\n' \
    >"$1/nvidia/cuda_nvcc/bin/ptxas"
  chmod +x "$1/nvidia/cuda_nvcc/bin/ptxas"
}
# Only the fake tree: no GPU tools, no python (SITE_PACKAGES replaces python3's sys.path).
NOGPU_ENV=(env -u XLA_FLAGS -u PJRT_CUDA_PLUGIN -u BACKEND -u CUDA_HOME -u ONLY)

echo "not an ELF file" >"$T/garbage.so"
fake_site "$T/site1" "$T/garbage.so"
run_check fake_garbage 1 "${NOGPU_ENV[@]}" SITE_PACKAGES="$T/site1" "${GC[@]}" --out "$T/fake1" --budget 120
S=$T/fake1/summary.txt
P=$T/site1/jax_plugins/xla_cuda13/xla_cuda_plugin.so
expect "$S" "mode: gpu" "plugin: $P" "backend: xla:$P" "cuda_data_dir: $T/site1/nvidia/cuda_nvcc" \
  "libdevice: libdevice.10.bc (" "ptxas: $T/site1/nvidia/cuda_nvcc/bin/ptxas (Cuda compilation tools, release 13.0, V13.0.88)" \
  "xla_flags: --xla_gpu_cuda_data_dir=$T/site1/nvidia/cuda_nvcc" "tf_cpp_min_log_level: 1" "gpu: " \
  "backend            failed" "stopped after the first stages, nothing else ran: backend failed:" "cannot load PJRT plugin $P" \
  "result: NOT ok"
if grep -E '^  (probe|sample|init|score_|parity_|sft_|grpo_|decode_|trainer_)' "$S" >/dev/null; then
  fail "fake_garbage: stages ran after the backend failed"
fi
expect "$T/fake1/gpu-check.log" "ls nvvm/libdevice" "libdevice.10.bc"

if command -v gcc >/dev/null 2>&1; then # a well-formed PJRT plugin of another major version
  cat >"$T/v1.c" <<'EOF'
#include <stddef.h>
typedef struct { size_t struct_size; void* ext; int major; int minor; } v;
typedef struct { size_t struct_size; void* ext; v version; } api;
static api the_api = { sizeof(api), 0, { sizeof(v), 0, 1, 0 } };
const api* GetPjrtApi(void) { return &the_api; }
EOF
  gcc -shared -fPIC -o "$T/v1.so" "$T/v1.c"
  fake_site "$T/site2" "$T/v1.so"
  run_check fake_v1 1 "${NOGPU_ENV[@]}" SITE_PACKAGES="$T/site2" "${GC[@]}" --out "$T/fake2" --budget 120
  expect "$T/fake2/summary.txt" "speaks PJRT C API 1.0, posttrain's client speaks 0.83" "stopped after the first stages" "result: NOT ok"
else
  echo "gpu-check-test: no gcc: the API-version fake is skipped" >&2
fi

mkdir -p "$T/empty"
run_check fake_none 1 "${NOGPU_ENV[@]}" SITE_PACKAGES="$T/empty" "${GC[@]}" --out "$T/fake3" --budget 120
expect "$T/fake3/summary.txt" "plugin: not found" "backend: xla:cuda" "no CUDA PJRT plugin found (searched" "pip install" "stopped after the first stages"
expect "$T/fake3/gpu-check.log" "no CUDA PJRT plugin found"

# 4. What travels to the GPU box: tracked and untracked-not-ignored files, plus the compressed
# binary (bin/posttrain.gz, which gpu-check.sh unpacks there; 64 MiB at most).
limit=$((64 * 1024 * 1024))
tree=$(cd "$ROOT" && git ls-files -co --exclude-standard -z 2>/dev/null | du -cb --files0-from=- 2>/dev/null | tail -n 1 | cut -f1 || echo 0)
[ -f "$BIN.gz" ] || fail "$BIN.gz is missing: make build writes it"
bin=$(stat -c %s "$BIN.gz" 2>/dev/null || echo 0)
echo "gpu-check-test: carried to the GPU box: working tree $((tree / 1024)) KiB + bin/posttrain.gz $((bin / 1024)) KiB of $((limit / 1024)) KiB"
[ $((tree + bin)) -lt "$limit" ] || fail "working tree ($tree bytes) + $BIN.gz ($bin bytes) exceed 64 MiB: build with make build (stripped, gzipped)"

if [ "$fails" -gt 0 ]; then
  echo "gpu-check-test: $fails failure(s)" >&2
  exit 1
fi
echo "gpu-check-test: ok (cpu for 6 families${DP_DONE:-}, rehearsal, 3 fake plugin trees, carry size)"
