#!/usr/bin/env python3
"""TRL 0.24.0's own trainers, step by step: the goldens of the trainers' TRL parity tests.

SFTTrainer, DPOTrainer (every loss type posttrain offers and its other options), KTOTrainer and
RewardTrainer of TRL 0.24.0 (transformers 4.57.6, torch 2.15.0 on the CPU, one thread; the pinned
`.venv-reference/trl-0.24`) train the tiny Qwen3 fixture (`models/testdata/qwen3-tiny/model`, with
`models/tinymodel`'s cut-down Qwen tokenizer beside it: 512 ids) for 5 optimizer steps each
(`METHODS`: the cases), float32, dropout 0, logging every step, on 20 rows this script writes
next to each golden (`CASE_ROWS`: cases with rows of their own). SFT, DPO and reward read the
rows in the order posttrain's loop visits them, through a sampler that yields pass e's
`trainers/engine/loop.Order(n, seed, e)` (`go_order`, checked against `ORDER` here and by the Go tests)
instead of HF's RandomSampler; KTOTrainer keeps its own SequentialSampler (0, 1, …), which
posttrain's KTO follows. Each case records the order its sampler gave. 20 rows are one pass of 5
steps of 2 × 2.

Each case's options are TRL's config fields, the same keys the Go tests hand to posttrain's
config (`config.Load`); the TRL-only ones that pin the run (CPU, no saving, no reporting) are
in `TRL_ONLY`. For each optimizer step the golden has TRL's `log_history` entry verbatim (`loss`
rounded to 4 decimals by HF's Trainer, `grad_norm`, `learning_rate`, `epoch` and every metric
the trainer logs) and `loss_unrounded`, the same value before HF rounds it (`tr_loss` over the
steps since the last log, read in `_maybe_log_save_evaluate`); KTO's also have
`logits/{chosen,rejected}@real_tokens` and `…@real_tokens_abs` (`kto_parity`). HF's closing summary entry
(`train_runtime`, `train_loss`, …) is listed by its keys only (`summary_keys`). The eval case's
evaluation entries (`evals`) are TRL's but for the wall-clock eval_runtime,
eval_samples_per_second and eval_steps_per_second, listed in `eval_timing_keys`.

Beside a method's golden.json, VARIANTS writes goldens of the same layout, one file each: the
DPO `sigmoid` and KTO `kto` cases on the Gemma 3 fixture (`models/testdata/gemma3-tiny/model`,
final_logit_softcapping 5: TRL's logits/* are of the soft-capped logits) as golden_gemma3.json,
and DPO's FLOAT64_DPO cases run in float64 (the model, its reference copy, the optimizer and,
through torch's default dtype, every tensor TRL makes; `"dtype": "float64"`) as
golden_float64.json, the values against which TestDPO_TRLParity holds the metrics that float32
cannot give within 1e-5 (and the Gemma 3 DPO case likewise as golden_gemma3_float64.json).
`--variant NAME` writes one golden of VARIANTS alone.

The reward model is the same fixture as `Qwen3ForSequenceClassification` with a score head
drawn by `from_pretrained(num_labels=1)` under `torch.manual_seed(0)`, saved (float32) as
`trainers/reward/testdata/trl_parity/model`, which both sides then load.

Regenerate (from the repository root; `make reference` runs it, scripts/reference/run.sh):

    .venv-reference/trl-0.24/bin/python scripts/reference/trl_parity.py [--out TREE]

which writes, under TREE (default: the repository), trainers/{sft,dpo,kto,reward}/testdata/
trl_parity/ (rows*.jsonl, golden.json, golden_gemma3.json for DPO and KTO, golden_float64.json
and golden_gemma3_float64.json for DPO; the reward model). --only sft,dpo,… runs some methods.
"""
import argparse
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import transformers  # noqa: E402
import trl  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
FIXTURE = "models/testdata/qwen3-tiny/model"
# Gemma 3 with final_logit_softcapping 5, whose logits reach past ±5: TRL logs the capped logits.
GEMMA_FIXTURE = "models/testdata/gemma3-tiny/model"
TOKENIZER = "models/tinymodel/files"
COMMAND = ".venv-reference/trl-0.24/bin/python scripts/reference/trl_parity.py"

# trainers/engine/loop.Order(20, 42, 0): the permutation posttrain's loop draws for pass 0 with seed 42
# (go_order reproduces it; main checks).
ORDER = [5, 4, 3, 9, 8, 1, 13, 6, 14, 19, 12, 10, 7, 16, 2, 15, 11, 18, 17, 0]
M64 = (1 << 64) - 1


def go_order(n, seed, epoch):
    """trainers/engine/loop.Order(n, seed, epoch): Go's math/rand/v2 rand.New(rand.NewPCG(seed,
    epoch+0x5eed)).Perm(n): PCG's 128-bit LCG with the DXSM output (pcg.go), Fisher-Yates from
    the last element with Lemire's multiply-and-reject uint64n (rand.go)."""
    mul = (2549297995355413924 << 64) | 4865540595714422341
    inc = (6364136223846793005 << 64) | 1442695040888963407
    state = ((seed & M64) << 64) | ((epoch + 0x5EED) & M64)

    def uint64():
        nonlocal state
        state = (state * mul + inc) & ((1 << 128) - 1)
        hi, lo = state >> 64, state & M64
        hi ^= hi >> 32
        hi = (hi * 0xDA942042E4DD58B5) & M64
        hi ^= hi >> 48
        return (hi * (lo | 1)) & M64

    def uint64n(k):
        if k & (k - 1) == 0:
            return uint64() & (k - 1)
        x = uint64() * k
        if x & M64 < k:
            thresh = ((1 << 64) - k) % k
            while x & M64 < thresh:
                x = uint64() * k
        return x >> 64

    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = uint64n(i + 1)
        p[i], p[j] = p[j], p[i]
    return p

# Options both sides get (TRL's names; posttrain's config takes the same keys).
COMMON = {
    "per_device_train_batch_size": 2,
    "gradient_accumulation_steps": 2,
    "max_steps": 5,
    "logging_steps": 1,
    "seed": 42,
}
# TRL-only options that pin the run: the CPU, float32, no checkpoints, no reporting.
TRL_ONLY = {
    "use_cpu": True,
    "bf16": False,
    "fp16": False,
    "report_to": [],
    "save_strategy": "no",
    "dataloader_num_workers": 0,
    "disable_tqdm": True,
}

# The rows (standard, not conversational): short English so that the byte-level BPE of 253
# merges gives 10-40 tokens, of varied lengths (padding in every micro-batch).
WORDS = ["red", "blue", "green", "apple", "river", "stone", "cloud", "seven", "light", "tree"]


def sft_rows():
    return [{"prompt": f"Q{i}: name a {WORDS[i % 10]} thing{'?' * (i % 3)}",
             "completion": f" A {WORDS[(i * 3) % 10]} {WORDS[(i * 7) % 10]}" + " ok" * (i % 4)} for i in range(20)]


def sft_messages_rows():
    return [{"messages": [{"role": "user", "content": f"Say {WORDS[i % 10]}" + " please" * (i % 3)},
                          {"role": "assistant", "content": f"{WORDS[(i * 3) % 10]} {WORDS[(i * 7) % 10]}" + "!" * (i % 4)}]}
            for i in range(20)]


def reward_margin_rows():
    return [dict(r, margin=round(0.25 * (i % 5), 2)) for i, r in enumerate(reward_rows())]


def dpo_rows():
    return [{"prompt": f"Is {i} {WORDS[i % 10]}?" + " Say" * (i % 3),
             "chosen": f" yes, {WORDS[(i + 3) % 10]}" + "!" * (i % 4),
             "rejected": f" no {WORDS[(i * 7) % 10]} {WORDS[(i + 1) % 10]}" * (1 + i % 2)} for i in range(20)]


def kto_rows():
    return [{"prompt": f"Tell {i} about {WORDS[i % 10]}" + "." * (i % 3),
             "completion": f" it is {WORDS[(i * 3) % 10]}" + " really" * (i % 4),
             "label": i % 3 != 1} for i in range(20)]


def reward_rows():
    return [{"prompt": f"Pick {i}: {WORDS[i % 10]} or {WORDS[(i + 5) % 10]}?",
             "chosen": f" {WORDS[i % 10]}, surely" + "!" * (i % 3),
             "rejected": f" {WORDS[(i + 5) % 10]}" + " maybe" * (1 + i % 2)} for i in range(20)]


def grpo_rows():
    # kind "spaces" on every third row: the spaces reward scores only those (None elsewhere).
    return [{"prompt": f"Q{i}: tell a {WORDS[i % 10]} {WORDS[(i * 3) % 10]} story" + "!" * (i % 3),
             "kind": "spaces" if i % 3 == 0 else "plain"} for i in range(8)]


DPO_LOSS_TYPES = ["sigmoid", "ipo", "hinge", "robust", "exo_pair", "nca_pair", "sppo_hard", "aot",
                  "aot_pair", "discopop", "apo_zero", "apo_down", "sft"]

# Cases that train on other rows than their method's (written beside them as rows_NAME.jsonl).
CASE_ROWS = {("sft", "messages_all_tokens"): ("messages", sft_messages_rows),
             ("reward", "margin"): ("margin", reward_margin_rows)}

# method → (rows, cases: name → options). Learning rates are large enough for every metric to move
# within 5 steps; the SFT cases have a warmup and weight decay, so learning_rate's schedule and
# the decay groups are checked too.
METHODS = {
    "sft": (sft_rows, {
        "nll_warmup_decay": {"learning_rate": 3e-3, "lr_scheduler_type": "linear", "warmup_steps": 2,
                             "weight_decay": 0.05},
        "dft_cosine": {"learning_rate": 3e-3, "lr_scheduler_type": "cosine", "loss_type": "dft"},
        "all_tokens_truncated": {"learning_rate": 3e-3, "completion_only_loss": False, "max_length": 12},
        "messages_all_tokens": {"learning_rate": 3e-3, "assistant_only_loss": False},
        "packing_bfd": {"learning_rate": 3e-3, "packing": True, "max_length": 40},
        "packing_wrapped": {"learning_rate": 3e-3, "packing": True, "packing_strategy": "wrapped", "max_length": 24},
        # 4 × 2 rows a step: 2.5 steps a pass, so step 3 has one micro-batch and steps 4-5 read pass 2.
        "two_passes": {"learning_rate": 3e-3, "per_device_train_batch_size": 4},
        "eval": {"learning_rate": 3e-3, "lr_scheduler_type": "constant", "eval_strategy": "steps", "eval_steps": 2},
    }),
    "dpo": (dpo_rows, {
        **{lt: {"learning_rate": 3e-3, "beta": 0.1, "loss_type": [lt]} for lt in DPO_LOSS_TYPES},
        # DPOConfig's other knobs, each on sigmoid unless it says otherwise.
        "mpo_weights": {"learning_rate": 3e-3, "loss_type": ["sigmoid", "sft"], "loss_weights": [0.8, 1.0]},
        "ipo_list": {"learning_rate": 3e-3, "loss_type": ["ipo", "hinge"]},
        "rpo_alpha": {"learning_rate": 3e-3, "rpo_alpha": 0.5},
        "cdpo": {"learning_rate": 3e-3, "label_smoothing": 0.1},
        "reference_free": {"learning_rate": 3e-3, "reference_free": True},
        "alpha_divergence": {"learning_rate": 3e-3, "f_divergence_type": "alpha_divergence",
                             "f_alpha_divergence_coef": 0.5},
        "js_divergence": {"learning_rate": 3e-3, "f_divergence_type": "js_divergence"},
        "ld_alpha": {"learning_rate": 3e-3, "ld_alpha": 0.5},
        "wpo": {"learning_rate": 3e-3, "use_weighting": True},
        "truncate_keep_end": {"learning_rate": 3e-3, "max_length": 20, "max_prompt_length": 8},
        "truncate_keep_start": {"learning_rate": 3e-3, "max_length": 20, "max_prompt_length": 8,
                                "truncation_mode": "keep_start"},
        "two_passes": {"learning_rate": 3e-3, "per_device_train_batch_size": 4},
        "eval": {"learning_rate": 3e-3, "loss_type": ["sigmoid"], "eval_strategy": "steps", "eval_steps": 2},
    }),
    "kto": (kto_rows, {
        "kto": {"learning_rate": 3e-3, "beta": 0.1},
        "apo_zero_unpaired": {"learning_rate": 3e-3, "beta": 0.1, "loss_type": "apo_zero_unpaired"},
        "weights_truncate": {"learning_rate": 3e-3, "beta": 0.2, "desirable_weight": 1.0, "undesirable_weight": 1.5,
                             "max_length": 16, "max_prompt_length": 8},
        "two_passes": {"learning_rate": 3e-3, "per_device_train_batch_size": 4},
        "eval": {"learning_rate": 3e-3, "eval_strategy": "steps", "eval_steps": 2},
    }),
    "reward": (reward_rows, {
        "default": {"learning_rate": 3e-3},
        "center_rewards": {"learning_rate": 3e-3, "center_rewards_coefficient": 0.01},
        "two_passes": {"learning_rate": 3e-3, "per_device_train_batch_size": 4},
        "eval": {"learning_rate": 3e-3, "eval_strategy": "steps", "eval_steps": 2},
        "margin": {"learning_rate": 3e-3},
    }),
}

# The DPO cases where a metric of TRL's float32 run is 1e-5 or more (relative) from its float64
# run (a small difference of large terms): the float64 variant reruns them in float64. Measured
# over every DPO case of golden.json: reference_free's loss and grad_norm (1.6e-5, 1.2e-5);
# every other metric of every case is within 7.3e-6.
FLOAT64_DPO = ["reference_free"]

# Goldens beside a method's golden.json, each a file of its own in the same layout: the same rows
# and options on another checkpoint, or in float64 (model, reference model, optimizer and every
# tensor TRL makes: torch's default dtype float64 for the run).
VARIANTS = {
    # The Gemma 3 fixture: TRL's logits/* are means and sums of its soft-capped logits.
    "gemma3": {"file": "golden_gemma3.json", "model": GEMMA_FIXTURE, "float64": False, "cases": {
        "dpo": {"sigmoid": METHODS["dpo"][1]["sigmoid"]},
        "kto": {"kto": METHODS["kto"][1]["kto"]},
    }},
    # TRL's float64 run of the FLOAT64_DPO cases: the values TRL's float32 run and posttrain's both
    # approximate (TestDPO_TRLParity holds posttrain at least as close to them as TRL's float32
    # run, for the metrics float32 cannot give within 1e-5).
    "float64": {"file": "golden_float64.json", "model": FIXTURE, "float64": True, "cases": {
        "dpo": {name: METHODS["dpo"][1][name] for name in FLOAT64_DPO},
    }},
    # TRL's float64 run of the Gemma 3 DPO case: its float32 grad_norm at step 4 is 1.1e-5 from
    # it (TestDPO_TRLParityGemma3Softcap holds that metric by the float64 rule).
    "gemma3_float64": {"file": "golden_gemma3_float64.json", "model": GEMMA_FIXTURE, "float64": True, "cases": {
        "dpo": {"sigmoid": METHODS["dpo"][1]["sigmoid"]},
    }},
}


# GRPO's options beside COMMON's: 4 completions of each prompt, micro-batches of 4 completions, so
# a generation batch (per_device_train_batch_size × steps_per_generation) is 2 prompts, 8 rows 4
# generation batches a pass, and step 5 starts the second pass.
GRPO_COMMON = {"per_device_train_batch_size": 4, "num_generations": 4, "max_completion_length": 8,
               "learning_rate": 3e-3, "reward_weights": [1.0, 0.5]}
GRPO_CASES = {
    "dapo": {},
    "grpo_kl": {"loss_type": "grpo", "beta": 0.1},
    "bnpo_scale_batch": {"loss_type": "bnpo", "scale_rewards": "batch"},
    "dr_grpo_scale_none": {"loss_type": "dr_grpo", "scale_rewards": "none"},
    "gspo": {"loss_type": "grpo", "importance_sampling_level": "sequence", "num_iterations": 2,
             "epsilon": 3e-4, "epsilon_high": 4e-4, "learning_rate": 3e-3},
    "off_policy_clip": {"num_iterations": 2, "epsilon": 0.05, "epsilon_high": 0.08, "delta": 1.1,
                        "learning_rate": 1e-3, "beta": 0.05},
    "steps_per_generation": {"steps_per_generation": 4},
    "mask_truncated": {"mask_truncated_completions": True},
    "entropy_mask": {"top_entropy_quantile": 0.5, "loss_type": "bnpo"},
}
STOP_LOGIT = 8.0
GRPO_MODEL = "trainers/grpo/testdata/trl_parity/model"
GRPO_ROLLOUTS = "trainers/grpo/testdata/trl_parity/rollouts.json"
GRPO_REWARDS = "trainers/grpo/testdata/trl_parity/rewards.py"
GO_RECORD = ["go", "test", "./trainers/grpo", "-run", "^TestGRPO_TRLParity$", "-count=1"]


def parity_rewards():
    """vowels and spaces from the reward file posttrain's side calls too (through its Python
    worker in TestGRPO_TRLParityPythonRewards)."""
    spec = importlib.util.spec_from_file_location("rewards", os.path.join(REPO, GRPO_REWARDS))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.vowels, mod.spaces


vowels, spaces = parity_rewards()


def write_grpo_model(src, out, rows):
    """The fixture with the embedding row of <|im_end|> (511, the stop token; tied: input and
    output) replaced by STOP_LOGIT / mean(h·m) · m, m the unit mean of the fixture's final
    (normed) hidden states h over the rows' prompts. The fixture almost never samples
    <|im_end|> (its rows' completions repeat a few tokens); h·m is positive at every position
    measured (mean 5.4, std 1.4, min 1.5 over a run's completions, against a log-sum-exp of the
    other logits of about 9.4), so this model ends a share of its 8-token completions, and the
    completions/*terminated* metrics and mask_truncated_completions have something to count.
    Nothing else changes: the prompts never hold 511, and nothing follows it."""
    m = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(src)
    with torch.no_grad():
        hs = []
        for r in rows:
            ids = torch.tensor([tok(r["prompt"], add_special_tokens=False)["input_ids"]])
            hs.append(m(ids, output_hidden_states=True).hidden_states[-1][0])
        h = torch.cat(hs)
        mean = h.mean(0)
        unit = mean / mean.norm()
        m.get_input_embeddings().weight[511] = STOP_LOGIT / (h @ unit).mean() * unit
    os.makedirs(out, exist_ok=True)
    m.save_pretrained(out, safe_serialization=True)


class RolloutSampler(torch.utils.data.Sampler):
    """GRPOTrainer's RepeatSampler layout (each generation batch's prompts, each num_generations
    times, the batch repeated num_iterations × steps_per_generation times) over the prompts
    posttrain drew (rollouts.json), with RepeatSampler's length, so that epochs are counted alike.
    Past the recorded batches it repeats the last (accelerate reads a batch ahead)."""

    def __init__(self, gens, num_generations, repeat_count, length):
        self.flat = [r for g in gens for _ in range(repeat_count) for r in g["rows"] for _ in range(num_generations)]
        self.tail = self.flat[-len(gens[-1]["rows"]) * num_generations * repeat_count:]
        self.length, self.pos, self.yielded = length, 0, []

    def __iter__(self):
        for _ in range(self.length):
            if self.pos >= len(self.flat):
                self.flat += self.tail
            i = self.flat[self.pos]
            self.pos += 1
            self.yielded.append(i)
            yield i

    def __len__(self):
        return self.length


def grpo_parity(gens, rows):
    """parity(GRPOTrainer) that generates nothing: each generation call returns the next batch
    posttrain sampled (its prompt and completion ids), after checking that TRL drew the same
    prompts and tokenizes them to the same ids; the completions' texts the reward functions get
    are checked against posttrain's. TRL's shuffle of a generation batch before it is split into
    micro-batches is turned off (posttrain keeps the rows in order)."""
    trl.trainer.grpo_trainer.shuffle_sequence_dict = lambda d: d

    class GRPOParity(parity(trl.GRPOTrainer)):
        def _get_train_sampler(self, dataset=None):
            inner = trl.GRPOTrainer._get_train_sampler(self, dataset)  # the RepeatSampler it would use
            self.sampler = RolloutSampler(gens, self.num_generations, inner.repeat_count, len(inner))
            return self.sampler

        def _generate_single_turn(self, prompts, images):
            assert self.model.training, "the parity cases do not evaluate"
            g = gens[self.gen_i]
            self.gen_i += 1
            want = [rows[r]["prompt"] for r in g["rows"] for _ in range(self.num_generations)]
            assert prompts == want, (self.gen_i, prompts, want)
            ids = self.processing_class(text=prompts, add_special_tokens=False)["input_ids"]
            assert ids == g["prompt_ids"], (self.gen_i, ids, g["prompt_ids"])
            self.texts = g["texts"]
            return g["prompt_ids"], g["completion_ids"], None, {}

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
            assert completions == self.texts, (completions, self.texts)
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)

    GRPOParity.__name__ = "GRPOTrainer"
    return GRPOParity


def run_grpo(a, mdir, tmp):
    """GRPO's golden: the rows and the model, the cases' options (golden.json without steps), then
    posttrain samples (TestGRPO_TRLParity with POSTTRAIN_TRL_RECORD writes rollouts.json), then
    TRL trains on those completions."""
    base = os.path.join(a.out, "trainers", "grpo", "testdata", "trl_parity")
    rows = grpo_rows()
    write_rows(os.path.join(base, "rows.jsonl"), rows)
    write_grpo_model(mdir, os.path.join(a.out, GRPO_MODEL), rows)
    golden = {
        "generator": COMMAND,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
        "model": GRPO_MODEL,
        "tokenizer": TOKENIZER,
        "rows": "trainers/grpo/testdata/trl_parity/rows.jsonl",
        "rollouts": GRPO_ROLLOUTS,
        # posttrain drew the prompts; TRL read them from rollouts.json in its RepeatSampler layout.
        "sampler": "rollouts",
        "common": COMMON,
        "trl_only": TRL_ONLY,
        "cases": {name: {"options": dict(GRPO_COMMON, **opts), "rows": "trainers/grpo/testdata/trl_parity/rows.jsonl"}
                  for name, opts in GRPO_CASES.items()},
    }
    write_json(os.path.join(base, "golden.json"), golden)
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_TEST_BACKEND"}
    env["POSTTRAIN_TRL_RECORD"] = os.path.abspath(a.out)
    print("trl_parity: grpo: posttrain samples the completions (" + " ".join(GO_RECORD) + ")", file=sys.stderr)
    subprocess.run(GO_RECORD, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(a.out, GRPO_ROLLOUTS)) as f:
        recorded = json.load(f)
    gdir = os.path.join(tmp, "grpo-model")
    shutil.copytree(os.path.join(a.out, GRPO_MODEL), gdir)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(REPO, TOKENIZER, name), gdir)
    for name, case in golden["cases"].items():
        print(f"trl_parity: grpo {name}", file=sys.stderr)
        replay_grpo_case(grpo_parity(recorded[name], rows), recorded[name], rows, case, case["options"],
                         gdir, os.path.join(tmp, f"grpo-{name}"))
    write_json(os.path.join(base, "golden.json"), golden)


def replay_grpo_case(trainer_cls, gens, rows, case, options, gdir, out):
    """Trains trainer_cls (a GRPOTrainer replaying gens) on rows with the case's options and adds
    its steps to case: TRL's log entries with the unrounded loss, the sampler's order, the summary
    entry's keys."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(gdir, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(gdir)
    args = dict(COMMON, **TRL_ONLY, **options, output_dir=out)
    tr = trainer_cls(model=model, reward_funcs=[vowels, spaces], args=trl.GRPOConfig(**args),
                     train_dataset=Dataset.from_list(rows), processing_class=tok)
    tr.gen_i, tr.unrounded = 0, []
    tr.remove_callback(transformers.PrinterCallback)
    tr.train()
    assert tr.gen_i == len(gens), (tr.gen_i, len(gens))
    steps = [e for e in tr.state.log_history if "loss" in e]
    summary = [e for e in tr.state.log_history if "train_runtime" in e]
    assert len(steps) == COMMON["max_steps"] == len(tr.unrounded), (len(steps), len(tr.unrounded))
    for e, u in zip(steps, tr.unrounded):
        e["loss_unrounded"] = u
    case.update({"order": tr.sampler.yielded, "num_rows": len(rows), "steps": steps,
                 "summary_keys": sorted(summary[0]) if summary else []})


# PPO's options beside COMMON's: TRL's PPOTrainer counts updates by total_episodes (max_steps is
# ignored; posttrain's max_steps 5 gives the same 5 updates), rollout batches of
# per_device_train_batch_size × gradient_accumulation_steps prompts.
PPO_COMMON = {"response_length": 8, "learning_rate": 3e-4, "num_ppo_epochs": 2, "stop_token": "eos",
              "temperature": 0.7}
PPO_CASES = {
    "k1": {"total_episodes": 20},
    "k3_whiten_penalty": {"total_episodes": 40, "per_device_train_batch_size": 4, "kl_estimator": "k3",
                          "whiten_rewards": True, "missing_eos_penalty": 1.0, "kl_coef": 0.1},
    "no_stop_gae": {"total_episodes": 20, "stop_token": None, "gamma": 0.99, "lam": 0.9, "cliprange": 0.1,
                    "cliprange_value": 0.05, "vf_coef": 0.5, "temperature": 1.0},
}
PPO_ROLLOUTS = "trainers/ppo/testdata/trl_parity/rollouts.json"
REWARD_MODEL = "trainers/reward/testdata/trl_parity/model"
GO_RECORD_PPO = ["go", "test", "./trainers/ppo", "-run", "^TestPPO_TRLParity$", "-count=1"]


class ListSampler(torch.utils.data.Sampler):
    """Yields the given indices (the queries in posttrain's order), then repeats the last batch
    (a dataloader may read ahead)."""

    def __init__(self, indices, batch):
        self.indices, self.batch = indices, batch

    def __iter__(self):
        yield from self.indices
        while True:
            yield from self.indices[-self.batch:]

    def __len__(self):
        return len(self.indices)


class Permutations:
    """trl.trainer.ppo_trainer's numpy, whose random.permutation returns each PPO epoch's
    permutation posttrain drew, in order."""

    def __init__(self, perms):
        self.perms, self.i = perms, 0
        self.random = self

    def permutation(self, n):
        p = self.perms[self.i]
        self.i += 1
        assert len(p) == n, (len(p), n)
        return np.array(p)

    def __getattr__(self, name):
        return getattr(np, name)


def replay_generation(ups, tok, pad):
    """trl.trainer.ppo_trainer.batch_generation replaced: each call returns the next update's
    queries with posttrain's responses, and the logits of a forward pass over them (TRL's
    `forward`, divided by the generation temperature as generate's scores are) in place of the
    generation's."""
    state = {"i": 0}

    def batch_generation(model, queries, local_rollout_forward_batch_size, pad_token_id, generation_config):
        up = ups[state["i"]]
        state["i"] += 1
        got = [[int(x) for x in q if x != pad_token_id] for q in queries.tolist()]
        assert got == up["prompt_ids"], (state["i"], got, up["prompt_ids"])
        responses = torch.tensor(up["responses"], dtype=queries.dtype)
        query_responses = torch.cat([queries, responses], 1)
        context = queries.shape[1]
        with torch.no_grad():
            logits = trl.trainer.ppo_trainer.forward(model, query_responses, pad_token_id).logits
        return query_responses, logits[:, context - 1:-1] / generation_config.temperature

    return batch_generation, state


def run_ppo(a, tmp):
    """PPO's golden as GRPO's (run_grpo): rows, options, posttrain's rollouts (TestPPO_TRLParity
    with POSTTRAIN_TRL_RECORD), then TRL's PPOTrainer on them."""
    base = os.path.join(a.out, "trainers", "ppo", "testdata", "trl_parity")
    rows = [{"prompt": r["prompt"]} for r in grpo_rows()]
    write_rows(os.path.join(base, "rows.jsonl"), rows)
    golden = {
        "generator": COMMAND,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__},
        "model": GRPO_MODEL,
        "reward_model": REWARD_MODEL,
        "tokenizer": TOKENIZER,
        "rows": "trainers/ppo/testdata/trl_parity/rows.jsonl",
        "rollouts": PPO_ROLLOUTS,
        "sampler": "rollouts",
        "common": COMMON,
        "trl_only": TRL_ONLY,
        "cases": {name: {"options": dict(PPO_COMMON, **opts), "rows": "trainers/ppo/testdata/trl_parity/rows.jsonl"}
                  for name, opts in PPO_CASES.items()},
    }
    for c in golden["cases"].values():  # TRL's None is posttrain's empty stop_token
        if c["options"]["stop_token"] is None:
            c["options"]["stop_token"] = ""
    write_json(os.path.join(base, "golden.json"), golden)
    env = {k: v for k, v in os.environ.items() if k != "POSTTRAIN_TEST_BACKEND"}
    env["POSTTRAIN_TRL_RECORD"] = os.path.abspath(a.out)
    print("trl_parity: ppo: posttrain samples the rollouts (" + " ".join(GO_RECORD_PPO) + ")", file=sys.stderr)
    subprocess.run(GO_RECORD_PPO, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(a.out, PPO_ROLLOUTS)) as f:
        recorded = json.load(f)
    dirs = {}
    for key, src in (("policy", os.path.join(a.out, GRPO_MODEL)), ("reward", os.path.join(a.out, REWARD_MODEL))):
        dirs[key] = os.path.join(tmp, f"ppo-{key}")
        if not os.path.exists(dirs[key]):
            shutil.copytree(src, dirs[key])
            for name in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(REPO, TOKENIZER, name), dirs[key])
    for name, case in golden["cases"].items():
        print(f"trl_parity: ppo {name}", file=sys.stderr)
        ups = recorded[name]
        opts = dict(case["options"])
        if opts["stop_token"] == "":
            opts["stop_token"] = None
        torch.manual_seed(0)
        tok = AutoTokenizer.from_pretrained(dirs["policy"], padding_side="left")
        policy = AutoModelForCausalLM.from_pretrained(dirs["policy"], dtype=torch.float32)
        ref = AutoModelForCausalLM.from_pretrained(dirs["policy"], dtype=torch.float32)
        reward = AutoModelForSequenceClassification.from_pretrained(dirs["reward"], num_labels=1, dtype=torch.float32)
        value = AutoModelForSequenceClassification.from_pretrained(dirs["reward"], num_labels=1, dtype=torch.float32)
        ds = Dataset.from_list([{"input_ids": tok(r["prompt"], add_special_tokens=False)["input_ids"]} for r in rows])
        args = dict(COMMON, **TRL_ONLY, **opts, output_dir=os.path.join(tmp, f"ppo-{name}"))
        args.pop("max_steps")
        args["num_sample_generations"] = 0
        tr = trl.PPOTrainer(args=trl.PPOConfig(**args), processing_class=tok, model=policy, ref_model=ref,
                            reward_model=reward, value_model=value, train_dataset=ds)
        order = [i for u in ups for i in u["rows"]]
        tr.dataloader = torch.utils.data.DataLoader(
            ds, batch_size=tr.local_dataloader_batch_size, sampler=ListSampler(order, tr.local_dataloader_batch_size),
            collate_fn=tr.data_collator)
        gen, state = replay_generation(ups, tok, tok.pad_token_id)
        trl.trainer.ppo_trainer.batch_generation = gen
        perms = Permutations([p for u in ups for p in u["perms"]])
        trl.trainer.ppo_trainer.np = perms
        tr.remove_callback(transformers.PrinterCallback)
        tr.train()
        trl.trainer.ppo_trainer.np = np
        assert state["i"] == len(ups) and perms.i == len(perms.perms), (name, state["i"], perms.i)
        steps = [e for e in tr.state.log_history if "objective/kl" in e]
        assert len(steps) == len(ups), (len(steps), len(ups))
        for e in steps:  # episodes per second: wall-clock, so its values are dropped
            del e["eps"]
        case.update({"timing_keys": ["eps"], "order": order, "num_rows": len(rows), "steps": steps,
                     "summary_keys": sorted(k for e in tr.state.log_history if "objective/kl" not in e for k in e)})
    write_json(os.path.join(base, "golden.json"), golden)


class PosttrainOrder(torch.utils.data.Sampler):
    """The rows in posttrain's order instead of HF's RandomSampler: pass e (the e-th __iter__)
    yields go_order(n, seed, e). yielded records what was read."""

    def __init__(self, n, seed):
        self.n, self.seed, self.epoch, self.yielded = n, seed, 0, []

    def __iter__(self):
        order = go_order(self.n, self.seed, self.epoch)
        self.epoch += 1
        for i in order:
            self.yielded.append(i)
            yield i

    def __len__(self):
        return self.n


class Recorded(torch.utils.data.Sampler):
    """A trainer's own sampler, what it yields recorded."""

    def __init__(self, inner):
        self.inner, self.yielded = inner, []

    def __iter__(self):
        for i in self.inner:
            self.yielded.append(i)
            yield i

    def __len__(self):
        return len(self.inner)


def parity(cls, own_sampler=False):
    """cls with posttrain's row order (own_sampler: the trainer's own sampler, which posttrain
    follows) and the unrounded loss of each logged step recorded."""

    class Parity(cls):
        def _get_train_sampler(self, *args, **kwargs):
            if own_sampler:
                self.sampler = Recorded(super()._get_train_sampler(*args, **kwargs))
            else:
                self.sampler = PosttrainOrder(len(self.train_dataset), self.args.seed)
            return self.sampler

        def _maybe_log_save_evaluate(self, tr_loss, *args, **kwargs):
            if self.control.should_log and self.state.global_step > self._globalstep_last_logged:
                steps = self.state.global_step - self._globalstep_last_logged
                self.unrounded.append(tr_loss.item() / steps)
            return super()._maybe_log_save_evaluate(tr_loss, *args, **kwargs)

    Parity.__name__ = cls.__name__
    return Parity


def kto_parity():
    """parity(KTOTrainer) that also logs logits/chosen@real_tokens and logits/rejected@real_tokens:
    TRL's logits/chosen and logits/rejected (the window's sum of each row's logits over every
    position and the vocabulary, over its row count) with the positions of the attention mask
    only, from the same policy forward pass, and their size, the same with |logit|
    (…@real_tokens_abs). TRL's own sum also takes the logits at the padding positions of the
    micro-batch; posttrain's metric is the real-token one."""

    class KTOParity(parity(trl.KTOTrainer, own_sampler=True)):
        def forward(self, model, batch):
            out = super().forward(model, batch)
            if model is not self.ref_model:
                mode = "train" if model.training else "eval"
                mask = batch["completion_attention_mask"].unsqueeze(-1).to(out[2].dtype)
                for split, logits, want in (("chosen", out[2], True), ("rejected", out[3], False)):
                    idx = [i for i, label in enumerate(batch["label"]) if label is want]
                    acc = self.real_logits[mode].setdefault(split, [0.0, 0.0, 0])
                    real = logits * mask[idx]
                    acc[0] += real.sum().item()
                    acc[1] += real.abs().sum().item()
                    acc[2] += len(idx)
            return out

        def log(self, logs, *args, **kwargs):
            mode, prefix = ("train", "") if "loss" in logs else ("eval", "eval_")
            for split, (total, size, count) in self.real_logits[mode].items():
                if count > 0:
                    logs[f"{prefix}logits/{split}@real_tokens"] = total / count
                    logs[f"{prefix}logits/{split}@real_tokens_abs"] = size / count
            self.real_logits[mode] = {}
            return super().log(logs, *args, **kwargs)

    KTOParity.__name__ = "KTOTrainer"
    return KTOParity


def model_dir(tmp, fixture=FIXTURE):
    """The fixture with the tokenizer beside it, as trainers/engine/loop/looptest.Fixture lays it out."""
    d = os.path.join(tmp, os.path.basename(os.path.dirname(fixture)))
    if os.path.exists(d):
        return d
    shutil.copytree(os.path.join(REPO, fixture), d)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(REPO, TOKENIZER, name), d)
    return d


def write_classifier(src, out):
    """The fixture as Qwen3ForSequenceClassification (num_labels 1), its score head drawn from
    torch.manual_seed(0), saved in float32 with pad_token_id set (posttrain's reward trainer sets
    it from the tokenizer's pad token, as TRL's RewardTrainer)."""
    torch.manual_seed(0)
    m = AutoModelForSequenceClassification.from_pretrained(src, num_labels=1, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(src)
    m.config.pad_token_id = tok.pad_token_id
    os.makedirs(out, exist_ok=True)
    m.save_pretrained(out, safe_serialization=True)


def trainer_for(method, opts, rows, mdir, cls_dir, out, dtype=torch.float32):
    tok = AutoTokenizer.from_pretrained(mdir)
    args = dict(COMMON, **TRL_ONLY, **opts, output_dir=out)
    ds = Dataset.from_list(rows)
    # With eval_strategy, the same rows are the eval set too (read in their order, HF's SequentialSampler).
    ev = {"eval_dataset": Dataset.from_list(rows)} if opts.get("eval_strategy", "no") != "no" else {}
    if method == "sft":
        model = AutoModelForCausalLM.from_pretrained(mdir, dtype=dtype)
        return parity(trl.SFTTrainer)(model=model, args=trl.SFTConfig(**args), train_dataset=ds, processing_class=tok, **ev)
    if method == "dpo":
        model = AutoModelForCausalLM.from_pretrained(mdir, dtype=dtype)
        return parity(trl.DPOTrainer)(model=model, args=trl.DPOConfig(**args), train_dataset=ds, processing_class=tok, **ev)
    if method == "kto":
        model = AutoModelForCausalLM.from_pretrained(mdir, dtype=dtype)
        tr = kto_parity()(model=model, args=trl.KTOConfig(**args), train_dataset=ds, processing_class=tok, **ev)
        tr.real_logits = {"train": {}, "eval": {}}
        return tr
    if method == "reward":
        model = AutoModelForSequenceClassification.from_pretrained(cls_dir, num_labels=1, dtype=dtype)
        return parity(trl.RewardTrainer)(model=model, args=trl.RewardConfig(**args), train_dataset=ds, processing_class=tok, **ev)
    raise ValueError(method)


def run_case(method, name, opts, rows, mdir, cls_dir, tmp, float64=False):
    """One case's TRL run; float64: the model in float64 and torch's default dtype float64 while
    it trains, so that the tensors TRL and HF's Trainer make (the loss accumulator, the metrics'
    means) are float64 too."""
    out = os.path.join(tmp, f"{method}-{name}{'-float64' if float64 else ''}")
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    dtype = torch.float64 if float64 else torch.float32
    torch.set_default_dtype(dtype)
    try:
        tr = trainer_for(method, opts, rows, mdir, cls_dir, out, dtype)
        tr.unrounded = []
        tr.remove_callback(transformers.PrinterCallback)  # disable_tqdm's stand-in prints every log
        tr.train()
        if float64:
            assert all(p.dtype == torch.float64 for p in tr.model.parameters()), name
    finally:
        torch.set_default_dtype(default)
    steps = [e for e in tr.state.log_history if "loss" in e]
    evals = [e for e in tr.state.log_history if "eval_loss" in e]
    summary = [e for e in tr.state.log_history if "train_runtime" in e]
    assert len(steps) == COMMON["max_steps"] == len(tr.unrounded), (len(steps), len(tr.unrounded))
    for e, u in zip(steps, tr.unrounded):
        e["loss_unrounded"] = u
    out = {"options": opts, "order": tr.sampler.yielded, "num_rows": len(tr.train_dataset), "steps": steps,
           "summary_keys": sorted(summary[0]) if summary else []}
    if evals:
        # Wall-clock values differ from run to run: their keys are kept, the values dropped.
        timing = sorted(k for k in evals[0] if k in ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second"))
        out["evals"] = [{k: v for k, v in e.items() if k not in timing} for e in evals]
        out["eval_timing_keys"] = timing
    return out


def nan_as_string(obj):
    """obj with every float NaN as the string "NaN" (JSON has no NaN; looptest reads it back)."""
    if isinstance(obj, float) and obj != obj:
        return "NaN"
    if isinstance(obj, dict):
        return {k: nan_as_string(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [nan_as_string(v) for v in obj]
    return obj


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(nan_as_string(obj), f, indent=1, sort_keys=True, allow_nan=False)
        f.write("\n")


def write_rows(path, rows):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def write_golden(a, method, make_rows, cases, fixture, file, float64, tmp, cls_dir):
    """Runs a method's cases on fixture (float64: in float64) and writes their golden,
    trainers/METHOD/testdata/trl_parity/FILE, with the rows beside it."""
    base = os.path.join(a.out, "trainers", method, "testdata", "trl_parity")
    rows = make_rows()
    write_rows(os.path.join(base, "rows.jsonl"), rows)
    mdir = model_dir(tmp, fixture)
    golden = {
        "generator": COMMAND,
        "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                     "torch": torch.__version__},
        "model": "trainers/reward/testdata/trl_parity/model" if method == "reward" else fixture,
        "tokenizer": TOKENIZER,
        "rows": f"trainers/{method}/testdata/trl_parity/rows.jsonl",
        # KTOTrainer's own SequentialSampler (posttrain's KTO is sequential too); else ORDER.
        "sampler": "trl" if method == "kto" else "posttrain",
        "common": COMMON,
        "trl_only": TRL_ONLY,
        "cases": {},
    }
    if float64:
        golden["dtype"] = "float64"
    for name, opts in cases.items():
        print(f"trl_parity: {method} {name}{' (' + file + ')' if file != 'golden.json' else ''}", file=sys.stderr)
        case_rows, rows_path = rows, golden["rows"]
        if (method, name) in CASE_ROWS:
            suffix, make = CASE_ROWS[(method, name)]
            case_rows, rows_path = make(), f"trainers/{method}/testdata/trl_parity/rows_{suffix}.jsonl"
            write_rows(os.path.join(a.out, rows_path), case_rows)
        golden["cases"][name] = run_case(method, name, opts, case_rows, mdir, cls_dir, tmp, float64)
        golden["cases"][name]["rows"] = rows_path
    write_json(os.path.join(base, file), golden)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=REPO, help="tree to write the goldens into (default: the repository)")
    ap.add_argument("--only", default="", help="comma-separated methods (default: all)")
    ap.add_argument("--variant", default="", help="only this golden of VARIANTS (e.g. gemma3_float64)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    transformers.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    logging.getLogger("trl").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    only = set(filter(None, a.only.split(",")))
    assert go_order(20, 42, 0) == ORDER, go_order(20, 42, 0)
    with tempfile.TemporaryDirectory() as tmp:
        mdir = model_dir(tmp)
        cls_dir = os.path.join(a.out, "trainers/reward/testdata/trl_parity/model")
        if a.variant:
            v = VARIANTS[a.variant]
            for method, cases in v["cases"].items():
                write_golden(a, method, METHODS[method][0], cases, v["model"], v["file"], v["float64"], tmp, cls_dir)
            return
        if not only or "reward" in only:
            write_classifier(mdir, cls_dir)
        for method, (make_rows, cases) in METHODS.items():
            if not only or method in only:
                write_golden(a, method, make_rows, cases, FIXTURE, "golden.json", False, tmp, cls_dir)
        for v in VARIANTS.values():
            for method, cases in v["cases"].items():
                if not only or method in only:
                    write_golden(a, method, METHODS[method][0], cases, v["model"], v["file"], v["float64"], tmp, cls_dir)
        if not only or "grpo" in only:
            run_grpo(a, mdir, tmp)
        if not only or "ppo" in only:
            if not os.path.exists(os.path.join(a.out, GRPO_MODEL)):
                write_grpo_model(mdir, os.path.join(a.out, GRPO_MODEL), grpo_rows())
            if not os.path.exists(cls_dir):
                write_classifier(mdir, cls_dir)
            run_ppo(a, tmp)


if __name__ == "__main__":
    main()
