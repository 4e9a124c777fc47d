# posttrain — build, test, run. `make test` is what CI runs (through .ci/run).
GO       ?= go
PKGS     := ./...
BIN      := bin/posttrain
export GOMLX_NO_AUTO_INSTALL := 1

.PHONY: all build build-static run course demo test fmt-check vet staticcheck unit bench clean
STATICCHECK_VERSION := v0.8.2

all: build

# Stripped (-s -w: no symbol table or DWARF; panics still print file:line): about 42 MB instead of
# 55. bin/posttrain.gz (gzip -1, about 17 MB) is what travels to a GPU box with the source tree
# within 64 MiB; scripts/gpu-check.sh unpacks it there (docs/gpu.md, "What to install").
build:
	$(GO) build -ldflags "-s -w" -o $(BIN) ./cmd/posttrain
	gzip -1 -c $(BIN) > $(BIN).gz.tmp && mv $(BIN).gz.tmp $(BIN).gz

# Pure-Go static binary with only the simplego backend (no cgo, no XLA).
build-static:
	CGO_ENABLED=0 $(GO) build -tags noxla -o bin/posttrain-static ./cmd/posttrain

# The README's main job on an embedded default, no download: `posttrain demo` (about 3 minutes on
# 2 cores on xla:cpu, the default once `make xla-cpu` has run; 11-12 on the pure-Go backend). `make course` prints the course's 74 lines in seconds.
run: demo

course:
	$(GO) run ./cmd/posttrain toy course

# GRPO learning multiplication on the CPU in minutes, no download (docs/demo.md).
demo:
	$(GO) run ./cmd/posttrain demo

test: fmt-check third-party-check vet staticcheck unit race-check unit-xla-installed fuzz-short gpu-check-cpu

# scripts/gpu-check.sh on the CPU, so the GPU check cannot rot: the CPU shapes, the GPU branch
# rehearsed at tiny sizes, fake CUDA plugin trees (discovery, report lines, stopping at the first
# stage) and the size of what travels to the GPU box (scripts/gpu-check-test.sh).
.PHONY: gpu-check-cpu
gpu-check-cpu: build
	bash scripts/gpu-check-test.sh $(BIN)

# test-real: the released SmolLM2-135M-Instruct and Gemma 3 270M (scripts/real-models.sh fetches
# and converts them) train with SFT, DPO, KTO and GRPO and resume bit for bit
# (cmd/posttrain TestRealModels_Train), on the CLI's default backend (xla:cpu where its plugin is
# installed, always in CI; the pure-Go backend otherwise), and one SFT step's loss, entropy and
# grad_norm agree on the pure-Go backend, xla:cpu and in float64 (TestRealModels_Numerics,
# docs/numerics.md); outside make test for its time.
.PHONY: test-real
test-real:
	bash scripts/real-models.sh
	@if [ -f $(XLA_PLUGIN) ] || [ "$$CI" = true ]; then be=xla:cpu; else be=go; fi; echo "test-real: training on $$be"; \
	POSTTRAIN_TEST_BACKEND=$$be POSTTRAIN_REAL_TRAIN=1 $(GO) test -count=1 -timeout 40m -run '^TestRealModels_(Train|Numerics)$$' -v ./cmd/posttrain/

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)
	CGO_ENABLED=0 $(GO) vet -tags noxla $(PKGS)
	$(GO) vet -tags hftokenizers $(PKGS)

# staticcheck at a pinned version, installed from the module proxy into bin/ (settings: staticcheck.conf).
staticcheck:
	@test -x bin/staticcheck-$(STATICCHECK_VERSION) || GOBIN=$(CURDIR)/bin/sc $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	@test -x bin/staticcheck-$(STATICCHECK_VERSION) || mv bin/sc/staticcheck bin/staticcheck-$(STATICCHECK_VERSION)
	bin/staticcheck-$(STATICCHECK_VERSION) $(PKGS)

# third_party/gomlx is GoMLX v0.26.0 plus the patches of third_party/patches and nothing else
# (third_party/README.md); go.mod's replace builds the project with it.
.PHONY: third-party-check
third-party-check:
	bash scripts/third-party-check.sh

unit:
	$(GO) test -count=1 -timeout 45m $(PKGS)

# The pure-Go backend's parallel executor under the race detector
# (third_party/patches/gomlx-v0.26.0-simplego-uses-read-under-lock.patch).
.PHONY: race-check
race-check:
	$(GO) test -race -count=1 -run '^TestPureGo_ParallelUsersOfOneBuffer$$' ./internal/backend

# The numerics-bearing packages again, on the pinned XLA CPU plugin (make xla-cpu): the family
# fixtures, generation with and without the KV cache, every trainer's steps and exact resume, bf16
# with float32 masters, LoRA, the toy course's GoMLX path. The tests take their backend from
# $POSTTRAIN_TEST_BACKEND (internal/backend ForTests); docs/xla.md, "Tests on both backends",
# lists them with their times. XLA_SKIP leaves to the pure-Go run, for time, the trainers' runs on
# the other tiny families (their numerics are models/decoder's family fixtures, which run here), the
# kill-and-resume fault tests (file durability, one process per kill) and the tests of files,
# flags and refusals.
XLA_PLUGIN    := bin/xla/pjrt_c_api_cpu_plugin.so
XLA_TEST_PKGS := ./internal/shard ./models/decoder ./models/generate ./trainers/engine/step ./trainers/engine/tokenmask ./trainers/engine/trainable ./trainers/engine/loop ./trainers/sft \
	./trainers/dpo ./trainers/kto ./trainers/grpo ./trainers/reward ./trainers/ppo ./toy/tinylmgomlx

XLA_SKIP      := ^Test(PPO_Families|GRPO_Families|Run_Families|Fault_|GRPOFault_
# files, flags and refusals: no numerics, and on XLA each of their runs compiles its graphs anew
XLA_SKIP      := $(XLA_SKIP)|Run_(OutputDir|Overwrite|ResumeRemovesStale|SaveSteps|ReportToTensorBoard|Preflight|Misnamed|ResumeChecksTheCheckpoint)
XLA_SKIP      := $(XLA_SKIP)|RunFiles_|ModelCard|WindowJSON_|Eval_Schedule|LoadScorer_PadToken|PPO_RefusesOtherVocabulary|GRPO_EvalBatchMustHoldWholeGroups
# the presets' files (init and load back; generation on XLA is TestGenerate_Families*'s)
XLA_SKIP      := $(XLA_SKIP)|Preset_TinyFamiliesInitAndLoad
XLA_SKIP      := $(XLA_SKIP)|SFT_(ChatTemplatePath|DatasetTextField|EOSToken|MalformedRowNamesLine|NoScoredTokenIsAnError|SomeUnscoredRowsWarn|PackingNeedsMaxLength)
# the driver's and PPO's host-side behaviour (a non-finite loss stops the run; evaluation on the
# cadence), checked on the pure-Go run; on XLA their numerics are the other tests' (PPO's resume,
# the generator's and the scorer's)
XLA_SKIP      := $(XLA_SKIP)|Run_NonFiniteStops|PPO_Evaluate
# GRPO's resume on XLA is TestGRPO_ResumeEqualsStraight (the default loss type with a reference,
# evaluation and a logging window); the other loss types and the random reward's stream resume
# exactly on the pure-Go run, and the loss types' graphs are checked on XLA by the loss tests
XLA_SKIP      := $(XLA_SKIP)|GRPO_ResumeEqualsStraightVariants
# TRL's step-by-step goldens: the semantics are checked on the pure-Go backend (unit); on XLA their
# 57 cases compile anew each (SFT, KTO and reward's took 3 minutes on xla:cpu under load, passing), while the same
# numerics stay covered there by the trainers' own tests
XLA_SKIP      := $(XLA_SKIP)|(SFT|DPO|KTO|Reward|GRPO|PPO)_TRL1?Parity)

.PHONY: unit-xla unit-xla-installed
unit-xla:
	@test -f $(XLA_PLUGIN) || { echo "unit-xla: $(XLA_PLUGIN) is missing: run make xla-cpu" >&2; exit 1; }
	POSTTRAIN_TEST_BACKEND=xla:cpu $(GO) test -count=1 -p 1 -timeout 30m -skip '$(XLA_SKIP)' $(XLA_TEST_PKGS)

# unit-xla where the plugin is installed, and always in CI (CI=true, set by .ci/run, which installs
# it), where a missing plugin is an error rather than a skip.
unit-xla-installed:
	@if [ -f $(XLA_PLUGIN) ] || [ "$$CI" = true ]; then $(MAKE) --no-print-directory unit-xla; \
	else echo "unit-xla: skipped: $(XLA_PLUGIN) is not installed (make xla-cpu installs it)"; fi

# Go native fuzz targets (package:target), one `go test -fuzz` each (Go fuzzes one target per
# invocation). `go test ./...` (unit) already replays their seeds and testdata/fuzz/ corpora; these
# run the fuzzer itself: `make fuzz` for FUZZTIME each (FUZZTIME=10m make fuzz for a long run),
# `make fuzz-short` (part of `make test`) for FUZZTIME_SHORT each. A failure leaves the input in
# the package's testdata/fuzz/TARGET/: commit it with the fix as a regression seed.
FUZZ_TARGETS := \
	./models/safetensors:FuzzParse ./models/safetensors:FuzzReadIndex \
	./models/decoder:FuzzParseConfig ./models/decoder:FuzzParseGenerationConfig ./models/decoder:FuzzParseBatchJSON \
	./data/tokenizer:FuzzFromJSON ./data/tokenizer:FuzzParseConfig \
	./data:FuzzRead ./data/chat:FuzzRender ./internal/checkpoint:FuzzLoad ./models/gguf:FuzzParse \
	./models/gguf:FuzzConfigAndTokenizer ./models/gguf:FuzzOllamaManifest ./data/extreward:FuzzMathAccuracy
# fuzz-short counts executions rather than seconds: with a duration, Go 1.26's fuzz coordinator can
# report "context deadline exceeded" at the deadline with no failing input on a loaded machine
# (go.dev/issue/75804, fixed in Go 1.27; seen here in make test), which would make CI flaky.
FUZZTIME       ?= 60s
FUZZTIME_SHORT ?= 200x

.PHONY: fuzz fuzz-short
fuzz:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZTIME)

fuzz-short:
	@$(MAKE) --no-print-directory fuzz-run FUZZ_FOR=$(FUZZTIME_SHORT)

.PHONY: fuzz-run
fuzz-run:
	@set -e; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t#*:}; \
		echo "fuzz $$pkg $$name ($(FUZZ_FOR))"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZ_FOR) $$pkg; \
	done

# The pinned XLA CPU PJRT plugin from PyPI (scripts/xla-cpu.sh: version and sha256), installed as
# bin/xla/pjrt_c_api_cpu_plugin.so, where `--backend xla:cpu` finds it; idempotent, and nothing
# downloads at run time (docs/xla.md).
.PHONY: xla-cpu
xla-cpu:
	scripts/xla-cpu.sh

# bench: posttrain's CPU workloads on xla:cpu (and on the pure-Go backend with BENCH_GO=1) and
# PyTorch 2.x's from the reference venv on the same shapes, interleaved in $BENCH_ROUNDS rounds
# (default 3, order alternating), the load average recorded before each side; one table of the
# median per-round ratios (apps/bench/cpucompare), refused when a round's two loads differ by more than 1;
# every round's figures in $BENCH_OUT (default: a printed temporary path). docs/benchmarks.md.
bench:
	scripts/bench-cpu.sh

# reference-env: the pinned PyTorch / transformers / TRL venvs under .venv-reference/
# (scripts/reference/requirements*.txt; scripts/reference/README.md). Idempotent.
.PHONY: reference-env
reference-env:
	scripts/reference-env.sh

# reference: regenerate, from the pinned venvs of reference-env, every golden that they make
# (the generators listed in scripts/reference/run.sh; which golden comes from which library and
# version: scripts/reference/README.md). reference-check: regenerate them into a temporary tree
# and fail on any difference from the committed files. Both run the tokenizer goldens' generator
# too (reference-tokenizers below).
.PHONY: reference reference-check
reference: reference-tokenizers
	scripts/reference/run.sh

reference-check: reference-tokenizers-check reference-tensorboard
	scripts/reference/run.sh --check

# reference-tensorboard: TensorBoard 2.21.0's own EventAccumulators (the trl-0.24 venv) read the
# event files of report_to tensorboard, straight, killed after step 3 and resumed from
# checkpoint-2 (TestRun_ReportToTensorBoard's runs): each (tag, step) once, in order, with
# metrics.jsonl's values (scripts/reference/tensorboard_check.py; docs/training.md, "TensorBoard").
.PHONY: reference-tensorboard
reference-tensorboard:
	@tb=$$(mktemp -d) && trap 'rm -rf "$$tb"' EXIT && \
	POSTTRAIN_TB_DUMP=$$tb/tb $(GO) test -count=1 -run '^TestRun_ReportToTensorBoard$$' ./trainers/engine/loop/ && \
	$(REFERENCE_PY) scripts/reference/tensorboard_check.py $$tb/tb

# hftokenizers: daulet/tokenizers' Rust static library (the version go.mod pins) built with cargo
# from crates.io at scripts/hftokenizers/Cargo.lock, into bin/hftokenizers/libtokenizers.a; kept
# (and cached across clones) while its stamp matches (docs/tokenizers.md, "HuggingFace's Rust
# library"). test-hftokenizers links it into the `-tags hftokenizers` build and runs the parity
# tests: the Rust library against every family's goldens and against the pure-Go tokenizer.
HFTOKENIZERS_LIB := $(CURDIR)/bin/hftokenizers
.PHONY: hftokenizers test-hftokenizers
hftokenizers:
	bash scripts/hftokenizers/build.sh

test-hftokenizers: hftokenizers
	CGO_LDFLAGS="-L$(HFTOKENIZERS_LIB)" $(GO) test -count=1 -tags hftokenizers -run '^TestHF_' -v ./data/tokenizer/

# reference-tokenizers: the tokenizer and chat-template goldens of data/tokenizer and data/chat
# from Python tokenizers and transformers in the pinned venv (make reference-env);
# reference-tokenizers-check regenerates them in memory and fails on any difference.
REFERENCE_PY := .venv-reference/trl-0.24/bin/python
.PHONY: reference-tokenizers reference-tokenizers-check
reference-tokenizers:
	$(REFERENCE_PY) scripts/reference/tokenizer_goldens.py

reference-tokenizers-check:
	$(REFERENCE_PY) scripts/reference/tokenizer_goldens.py --check

# bench-go: every Go benchmark once (BenchmarkCPU's 0.5B decode included).
.PHONY: bench-go
bench-go:
	$(GO) test -run '^$$' -bench . -benchtime 1x $(PKGS)

clean:
	rm -rf bin
