package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// The keys of TRL 0.24's configs (SFTConfig, DPOConfig, KTOConfig, GRPOConfig, RewardConfig,
// PPOConfig: HF's TrainingArguments and TRL's own), of its ScriptArguments and ModelConfig, that
// posttrain has no option for. A TRL YAML config pastes as it is: each such key is taken with a
// one-line note where it cannot change what posttrain computes (logging, the Hub, dataloader
// workers, distributed launchers, kernels), at a value that changes nothing (use_vllm: false,
// push_to_hub: false), and refused where ignoring it would change the training, every refused
// key of the file in one message, each with what to do (trlKey.fix).
type trlKey struct {
	// ok reports whether a value changes nothing here; nil: no value does (noted, never refused).
	ok func(v *yaml.Node) bool
	// note says why the key changes nothing here (printed when it is given); "" for a value
	// that is TRL's default (silent).
	note string
	// fix is what to do when a value is refused.
	fix string
}

func isNull(v *yaml.Node) bool { return v.Kind == yaml.ScalarNode && v.Tag == "!!null" }

func isBool(b bool) func(*yaml.Node) bool {
	return func(v *yaml.Node) bool {
		var x bool
		return isNull(v) || (v.Decode(&x) == nil && x == b)
	}
}

func isOneOf(vals ...string) func(*yaml.Node) bool {
	return func(v *yaml.Node) bool {
		if isNull(v) {
			return true
		}
		for _, s := range vals {
			if v.Kind == yaml.ScalarNode && strings.EqualFold(v.Value, s) {
				return true
			}
		}
		return false
	}
}

func isZero(v *yaml.Node) bool {
	var x float64
	return isNull(v) || (v.Decode(&x) == nil && x == 0)
}

func isEmpty(v *yaml.Node) bool {
	return isNull(v) || ((v.Kind == yaml.MappingNode || v.Kind == yaml.SequenceNode) && len(v.Content) == 0) ||
		(v.Kind == yaml.ScalarNode && v.Value == "")
}

const (
	noteOneProcess = "posttrain is one process; --devices N splits a run over devices"
	noteLogging    = "logging and reporting only"
	noteHub        = "posttrain does not upload: push OUTPUT_DIR with huggingface-cli upload"
	noteKernels    = "a kernel or compilation choice: posttrain's XLA graphs compute the same values"
	noteData       = "dataset preparation: posttrain reads and tokenizes the rows itself"
	noteEval       = "evaluation bookkeeping: posttrain's eval lines are HF's eval_loss and the method's metrics"
	noteSaving     = "posttrain saves every save_steps and at the end"
	noteVLLM       = "posttrain generates with its own engine (use_vllm is false)"
)

var trlKeys = map[string]trlKey{
	// launchers and devices
	"accelerator_config": {note: noteOneProcess}, "ddp_backend": {note: noteOneProcess}, "ddp_broadcast_buffers": {note: noteOneProcess},
	"ddp_bucket_cap_mb": {note: noteOneProcess}, "ddp_find_unused_parameters": {note: noteOneProcess}, "ddp_timeout": {note: noteOneProcess},
	"local_rank": {note: noteOneProcess}, "parallelism_config": {note: noteOneProcess}, "tpu_num_cores": {note: noteOneProcess},
	"tpu_metrics_debug": {note: noteOneProcess}, "no_cuda": {note: noteOneProcess}, "use_cpu": {note: "the device is --backend's"},
	"use_mps_device": {note: noteOneProcess}, "deepspeed": {note: noteOneProcess + " (--fsdp splits the state)"},
	"fsdp_config": {note: noteOneProcess + " (--fsdp splits the state)"}, "fsdp_min_num_params": {note: noteOneProcess},
	"fsdp_transformer_layer_cls_to_wrap": {note: noteOneProcess}, "ds3_gather_for_generation": {note: noteOneProcess},
	"save_on_each_node": {note: noteOneProcess}, "log_on_each_node": {note: noteOneProcess}, "mp_parameters": {note: noteOneProcess},
	"average_tokens_across_devices": {note: "posttrain normalises over the global batch as one process does"},
	"world_size":                    {note: noteOneProcess}, "_n_gpu": {note: noteOneProcess},
	// logging, reporting, the Hub
	"logging_dir": {note: noteLogging}, "logging_first_step": {note: noteLogging}, "logging_nan_inf_filter": {note: noteLogging},
	"logging_strategy": {note: "posttrain logs every logging_steps"}, "log_level": {note: noteLogging}, "log_level_replica": {note: noteLogging},
	"disable_tqdm": {note: noteLogging}, "run_name": {note: noteLogging}, "project": {note: noteLogging}, "trackio_space_id": {note: noteLogging},
	"skip_memory_metrics": {note: noteLogging}, "include_tokens_per_second": {note: noteLogging},
	"include_num_input_tokens_seen": {note: noteLogging}, "debug": {note: noteLogging}, "exp_name": {note: noteLogging},
	"num_completions_to_print": {note: noteLogging}, "wandb_log_unique_prompts": {note: noteLogging},
	"num_sample_generations": {note: noteLogging}, "generate_during_eval": {note: noteLogging},
	"push_to_hub": {ok: isBool(false), fix: noteHub}, "hub_model_id": {note: noteHub}, "hub_strategy": {note: noteHub},
	"hub_token": {note: noteHub}, "hub_private_repo": {note: noteHub}, "hub_always_push": {note: noteHub}, "hub_revision": {note: noteHub},
	"push_to_hub_model_id": {note: noteHub}, "push_to_hub_organization": {note: noteHub}, "push_to_hub_token": {note: noteHub},
	// dataloading and dataset preparation
	"dataloader_num_workers": {note: noteData}, "dataloader_pin_memory": {note: noteData}, "dataloader_persistent_workers": {note: noteData},
	"dataloader_prefetch_factor": {note: noteData}, "dataset_num_proc": {note: noteData}, "remove_unused_columns": {note: noteData},
	"label_names": {note: noteData}, "length_column_name": {note: noteData}, "dataset_streaming": {note: "sft always streams its rows and maps its tokens; the other methods read the rows into memory"},
	"pad_to_multiple_of":   {note: "padding changes no value (padded positions are masked)"},
	"padding_value":        {ok: isNull, fix: "posttrain pads with the tokenizer's pad token and masks the padding: remove it"},
	"label_pad_token_id":   {ok: isOneOf("-100"), fix: "posttrain masks padding itself: remove it"},
	"dataloader_drop_last": {ok: isBool(false), fix: "posttrain trains on a partial last batch, as HF's default does: remove it"},
	"group_by_length":      {ok: isBool(false), fix: "posttrain's row order is HF's RandomSampler's: remove it"},
	"data_seed":            {ok: isNull, fix: "posttrain's row order follows seed: set seed instead"},
	"ignore_data_skip":     {ok: isBool(false), fix: "a resumed posttrain run always continues at its data position: remove it"},
	"shuffle_dataset":      {ok: isBool(true), fix: "posttrain shuffles GRPO's prompts each pass: remove it"},
	"dataset_kwargs":       {ok: isEmpty, fix: "posttrain always prepares the dataset (skip_prepare_dataset is not available): remove it"},
	"pad_token":            {ok: isNull, fix: "posttrain pads with the tokenizer's pad token: set it in tokenizer_config.json"},
	"eos_token":            {ok: isNull, fix: "set it in tokenizer_config.json, or use sft's eos_token"},
	"eval_packing":         {note: "SFT's eval set is packed as the training set is (packing)"},
	// kernels, compilation, memory
	"torch_compile": {note: noteKernels}, "torch_compile_backend": {note: noteKernels}, "torch_compile_mode": {note: noteKernels},
	"torchdynamo": {note: noteKernels}, "jit_mode_eval": {note: noteKernels}, "use_liger_kernel": {note: noteKernels},
	"use_liger_loss": {note: noteKernels}, "liger_kernel_config": {note: noteKernels}, "attn_implementation": {note: noteKernels},
	"half_precision_backend": {note: noteKernels}, "use_logits_to_keep": {note: noteKernels}, "cache_implementation": {note: noteKernels},
	"use_transformers_paged": {note: noteKernels}, "padding_free": {note: "padding changes no value (padded positions are masked)"},
	"activation_offloading":                {note: "memory only: gradient_checkpointing is posttrain's means"},
	"gradient_checkpointing_kwargs":        {note: "posttrain recomputes each decoder layer (gradient_checkpointing)"},
	"gradient_checkpointing_use_reentrant": {note: "posttrain recomputes each decoder layer (gradient_checkpointing)"},
	"torch_empty_cache_steps":              {note: "memory only"}, "auto_find_batch_size": {ok: isBool(false), fix: "set per_device_train_batch_size (posttrain bench memory says what fits)"},
	"dtype":                     {note: "posttrain loads float32 master weights; bf16 sets the compute dtype"},
	"torch_dtype":               {note: "posttrain loads float32 master weights; bf16 sets the compute dtype"},
	"trust_remote_code":         {note: "posttrain runs no code from the model repo"},
	"model_init_kwargs":         {note: "posttrain loads the checkpoint itself (float32 masters)"},
	"ref_model_init_kwargs":     {note: "posttrain loads the checkpoint itself (float32 masters)"},
	"base_model_attribute_name": {note: "posttrain knows each family's layout"},
	"is_encoder_decoder":        {ok: isBool(false), fix: "posttrain trains decoder-only models"},
	// saving and evaluation bookkeeping
	"save_strategy": {note: noteSaving}, "save_only_model": {note: noteSaving}, "save_safetensors": {note: "posttrain writes safetensors"},
	"restore_callback_states_from_checkpoint": {note: noteSaving},
	"load_best_model_at_end":                  {ok: isBool(false), fix: "posttrain's final model is the last step's: pick a checkpoint-N instead"},
	"metric_for_best_model":                   {note: noteEval}, "greater_is_better": {note: noteEval}, "prediction_loss_only": {note: noteEval},
	"eval_accumulation_steps": {note: noteEval}, "eval_delay": {note: noteEval}, "eval_do_concat_batches": {note: noteEval},
	"eval_use_gather_object": {note: noteEval}, "batch_eval_metrics": {note: noteEval}, "include_for_metrics": {note: noteEval},
	"include_inputs_for_metrics": {note: noteEval}, "use_legacy_prediction_loop": {note: noteEval}, "past_index": {note: noteEval},
	"bf16_full_eval": {note: noteEval}, "fp16_full_eval": {ok: isBool(false), fix: "use bf16"}, "ray_scope": {note: noteEval},
	"do_train": {note: "the command trains"}, "do_eval": {note: "eval_strategy decides"}, "do_predict": {note: noteEval},
	// the update: refused unless at a value posttrain computes
	"optim": {ok: isOneOf("adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_torch_xla", "adamw_apex_fused"),
		fix: "posttrain's optimizer is AdamW (adamw_torch's): remove optim or set adamw_torch"},
	"optim_args":             {ok: isEmpty, fix: "AdamW's options are adam_beta1, adam_beta2, adam_epsilon and weight_decay"},
	"optim_target_modules":   {ok: isNull, fix: "remove it (GaLore and friends are not available)"},
	"adafactor":              {ok: isBool(false), fix: "posttrain's optimizer is AdamW: remove it"},
	"lr_scheduler_kwargs":    {ok: isEmpty, fix: "lr_scheduler_type's schedules take no options here: remove it"},
	"label_smoothing_factor": {ok: isZero, fix: "label smoothing is not implemented: remove it"},
	"neftune_noise_alpha":    {ok: isNull, fix: "NEFTune is not implemented: remove it"},
	"fp16":                   {ok: isBool(false), fix: "use bf16 (float32 masters, bfloat16 compute)"},
	"fp16_backend":           {note: noteKernels}, "fp16_opt_level": {note: noteKernels},
	"per_gpu_train_batch_size": {ok: isNull, fix: "use per_device_train_batch_size"},
	"per_gpu_eval_batch_size":  {ok: isNull, fix: "use per_device_eval_batch_size"},
	// models: quantisation, revisions, adapters
	"load_in_4bit":              {ok: isBool(false), fix: "quantised training (QLoRA) is not implemented: train LoRA on the bf16 model (--use-peft --bf16)"},
	"load_in_8bit":              {ok: isBool(false), fix: "quantised training is not implemented: train LoRA on the bf16 model (--use-peft --bf16)"},
	"bnb_4bit_quant_type":       {note: "bitsandbytes quantisation is off (load_in_4bit false)"},
	"use_bnb_nested_quant":      {note: "bitsandbytes quantisation is off (load_in_4bit false)"},
	"model_revision":            {ok: isOneOf("main"), fix: "give the revision's snapshot directory, or its commit in the HuggingFace cache, as model_name_or_path"},
	"use_dora":                  {ok: isBool(false), fix: "DoRA is not implemented: remove it"},
	"lora_target_parameters":    {ok: isEmpty, fix: "LoRA on parameters (MoE experts) is not implemented: use lora_target_modules"},
	"lora_task_type":            {note: "posttrain writes CAUSAL_LM adapters (SEQ_CLS for reward models)"},
	"model_adapter_name":        {ok: isNull, fix: "posttrain trains one adapter: remove it"},
	"ref_adapter_name":          {ok: isNull, fix: "the reference of a LoRA run is its base: remove it"},
	"force_use_ref_model":       {note: "the reference of a LoRA run is its base, as TRL's default"},
	"precompute_ref_log_probs":  {note: "the reference log-probs are the same computed once or each step"},
	"precompute_ref_batch_size": {note: "the reference log-probs are the same computed once or each step"},
	"tools":                     {ok: isEmpty, fix: "DPO with tools is not implemented: remove it"},
	// GRPO's generation with vLLM
	"use_vllm":  {ok: isBool(false), fix: "posttrain generates with its own engine (the KV cache on the training backend): remove use_vllm"},
	"vllm_mode": {note: noteVLLM}, "vllm_server_base_url": {note: noteVLLM}, "vllm_server_host": {note: noteVLLM},
	"vllm_server_port": {note: noteVLLM}, "vllm_server_timeout": {note: noteVLLM}, "vllm_gpu_memory_utilization": {note: noteVLLM},
	"vllm_tensor_parallel_size": {note: noteVLLM}, "vllm_enable_sleep_mode": {note: noteVLLM}, "vllm_model_impl": {note: noteVLLM},
	"vllm_importance_sampling_correction": {note: noteVLLM}, "vllm_importance_sampling_cap": {note: noteVLLM},
	"vllm_guided_decoding_regex": {ok: isNull, fix: "guided decoding is not implemented: remove it"},
	"generation_kwargs":          {ok: isEmpty, fix: "set the sampler with temperature, top_p, top_k, min_p and repetition_penalty"},
	"generation_batch_size":      {ok: isNull, fix: "set steps_per_generation (generation_batch_size = per_device_train_batch_size × steps_per_generation)"},
	// PPO's derived batch sizes (TRL computes them)
	"batch_size": {note: "derived by TRL from the other batch options"}, "local_batch_size": {note: "derived by TRL from the other batch options"},
	"mini_batch_size": {note: "derived by TRL from the other batch options"}, "local_mini_batch_size": {note: "derived by TRL from the other batch options"},
	"micro_batch_size": {note: "derived by TRL from the other batch options"}, "num_total_batches": {note: "derived by TRL from the other batch options"},
	"sft_model_path": {note: "PPO's policy is model_name_or_path"},
	// options of other methods' configs
	"sync_ref_model":        {ok: isBool(false), fix: "TR-DPO's reference updates are GRPO's here (posttrain grpo --sync-ref-model): remove it"},
	"ref_model_mixup_alpha": {note: "used with sync_ref_model only"}, "ref_model_sync_steps": {note: "used with sync_ref_model only"},
	"use_peft": {ok: isBool(false), fix: "LoRA is not available for this method: remove it"},
	"lora_r":   {note: "used with use_peft only"}, "lora_alpha": {note: "used with use_peft only"},
	"lora_dropout": {note: "used with use_peft only"}, "lora_target_modules": {note: "used with use_peft only"},
	"lora_modules_to_save": {note: "used with use_peft only"}, "use_rslora": {note: "used with use_peft only"},
	"disable_dropout":    {note: "posttrain's decoders have no dropout (a LoRA adapter's lora_dropout aside)"},
	"chat_template":      {ok: isNull, fix: "write the template to a file and give it as chat_template_path, or set it in the model's tokenizer_config.json"},
	"chat_template_path": {ok: isNull, fix: "put the template in the model's tokenizer_config.json (chat_template) for this method"},
	// TRL's dataset mixtures (datasets: is honoured)
	"streaming":       {note: "posttrain reads the rows into memory"},
	"test_split_size": {ok: isNull, fix: "posttrain draws no random test split (TRL's train_test_split is unseeded): give eval_dataset"},
}

// trlKeyProblem is how a key posttrain has no option for is taken: a note (ok, note), silence
// (ok, ""), or a refusal (!ok, what to do); known is false for a key TRL does not define either.
func trlKeyProblem(key string, v *yaml.Node) (known, ok bool, say string) {
	k, found := trlKeys[key]
	if !found {
		return false, false, ""
	}
	if k.ok != nil {
		if k.ok(v) {
			return true, true, ""
		}
		return true, false, k.fix
	}
	return true, true, k.note
}

// scalarText is a YAML value as it reads, for a message: short scalars as they are, anything
// else quoted and cut at 40 characters.
func scalarText(v *yaml.Node) string {
	s := v.Value
	if v.Kind != yaml.ScalarNode {
		b, err := yaml.Marshal(v)
		if err != nil {
			return "…"
		}
		s = strings.Join(strings.Fields(string(b)), " ")
	} else if len(s) <= 40 && !strings.ContainsAny(s, "\n;") {
		return s
	}
	if r := []rune(s); len(r) > 40 {
		s = string(r[:40]) + "…"
	}
	return fmt.Sprintf("%q", s)
}
