// Package extreward runs reward functions that live outside posttrain: Python functions written
// for TRL's GRPOTrainer, called in a long-lived worker process (Start), and reward servers over
// HTTP (NewURL). Both receive what TRL passes a reward function:
//
//	f(prompts=…, completions=…, completion_ids=…, trainer_state=…, **dataset_columns)
//
// and return one reward per completion, None (JSON null) meaning "not scored".
package extreward

import (
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/posttrain/posttrain/data/chat"
)

// DefaultTimeout is how long one reward call may take (--reward-timeout).
const DefaultTimeout = 300 * time.Second

// Call is one reward call's arguments, as TRL's GRPOTrainer builds them (grpo_trainer.py
// _generate_and_score_completions and _calculate_rewards).
type Call struct {
	// Prompts are each completion's prompt: the text of a standard row, the message list of a
	// conversational one (without a final assistant message, which TRL moves into the completion).
	Prompts []any
	// Completions are the completion texts (decoded without special tokens) of standard rows, and
	// one assistant message each ([{"role": "assistant", "content": text}]) of conversational ones.
	Completions []any
	// CompletionIDs are the completions' token ids up to and including the first stop token.
	CompletionIDs [][]int32
	// Columns are the dataset's other columns, one value per completion.
	Columns map[string][]any
	State   State
	// Query is each prompt as the model saw it (a conversation through the chat template)
	// followed by its completion's text: OpenRLHF's "query", sent to reward servers only.
	Query []string
}

// State is the part of HF's TrainerState a reward function may read (trainer_state), as of the
// generation: the optimizer steps done, the fractional epoch, and the run's length and cadence.
type State struct {
	GlobalStep         int     `json:"global_step"`
	Epoch              float64 `json:"epoch"`
	MaxSteps           int     `json:"max_steps"`
	NumTrainEpochs     float64 `json:"num_train_epochs"`
	LoggingSteps       int     `json:"logging_steps"`
	EvalSteps          int     `json:"eval_steps"`
	SaveSteps          int     `json:"save_steps"`
	TrainBatchSize     int     `json:"train_batch_size"`
	IsLocalProcessZero bool    `json:"is_local_process_zero"`
	IsWorldProcessZero bool    `json:"is_world_process_zero"`
}

// reserved are the keyword arguments TRL itself passes; a dataset column of one of these names
// would be passed twice (TRL drops "prompt", "completion" and "completion_ids" columns).
var reserved = map[string]bool{"prompts": true, "completions": true, "completion_ids": true, "trainer_state": true}

// dropped are the columns TRL does not pass on (grpo_trainer.py: keys not in prompt, completion,
// completion_ids).
var dropped = map[string]bool{"prompt": true, "completion": true, "completion_ids": true}

// kwargs are the call's keyword arguments (trainer_state aside).
func (c Call) kwargs() (map[string]any, error) {
	n := len(c.Completions)
	if len(c.Prompts) != n || len(c.CompletionIDs) != n {
		return nil, fmt.Errorf("%d prompts, %d completions and %d completion id lists", len(c.Prompts), n, len(c.CompletionIDs))
	}
	kw := map[string]any{"prompts": c.Prompts, "completions": c.Completions, "completion_ids": c.CompletionIDs}
	for k, v := range c.Columns {
		if dropped[k] {
			continue
		}
		if reserved[k] {
			return nil, fmt.Errorf("the dataset's column %q has the name of an argument TRL passes itself: rename the column", k)
		}
		if len(v) != n {
			return nil, fmt.Errorf("column %q has %d values for %d completions", k, len(v), n)
		}
		kw[k] = v
	}
	return kw, nil
}

// Func is one external reward function: a Python function of the worker or a reward server.
type Func struct {
	// Name is the name TRL logs it under (rewards/NAME/mean): the Python function's __name__, or
	// the server's path.
	Name string
	// Spec is what the command line named it by.
	Spec string
	// Undecidable: a NaN from it means "outside what it decides" (the Go accuracy_reward), not a
	// sample it was not meant to score; the trainer logs their fraction, rewards/NAME/undecided.
	Undecidable bool
	score       func(Call) ([]float64, error)
}

// Score calls the function on one batch. A completion it does not score (None) is NaN in the
// result, as TRL's torch.nan; a wrong count or a non-finite reward is an error.
func (f *Func) Score(c Call) ([]float64, error) {
	out, err := f.score(c)
	if err != nil {
		return nil, err
	}
	if len(out) != len(c.Completions) {
		return nil, fmt.Errorf("returned %d rewards for %d completions", len(out), len(c.Completions))
	}
	return out, nil
}

// rewards turns a JSON reward list into float64s, null being NaN ("not scored").
func rewards(vals []*float64) ([]float64, error) {
	out := make([]float64, len(vals))
	for i, v := range vals {
		switch {
		case v == nil:
			out[i] = math.NaN()
		case math.IsNaN(*v) || math.IsInf(*v, 0):
			return nil, fmt.Errorf("returned %g at index %d (null is a completion it does not score)", *v, i)
		default:
			out[i] = *v
		}
	}
	return out, nil
}

var (
	pyFileSpec = regexp.MustCompile(`^.+\.py:[A-Za-z_][A-Za-z0-9_]*$`)
	dottedSpec = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$`)
)

// IsPythonSpec reports whether a reward_funcs entry names a Python function: FILE.py:FUNC or a
// dotted module.func (TRL's grpo.py takes the latter).
// A bare FILE.py is not one (it names no function).
func IsPythonSpec(s string) bool {
	return pyFileSpec.MatchString(s) || (dottedSpec.MatchString(s) && !strings.HasSuffix(s, ".py"))
}

// ConversationalCompletion is TRL's completion of a conversational prompt: the prompt's final
// assistant message, when it ends with one, is taken off the prompt and its content put before
// the completion's text (grpo_trainer.py: bootstrap = prompt.pop()["content"]).
func ConversationalCompletion(prompt []chat.Message, text string) ([]chat.Message, []chat.Message) {
	if k := len(prompt); k > 0 && prompt[k-1].Role == "assistant" {
		return prompt[:k-1], []chat.Message{{Role: "assistant", Content: prompt[k-1].Content + text}}
	}
	return prompt, []chat.Message{{Role: "assistant", Content: text}}
}

// urlName is a reward server's logged name: its path's last segment, else its host.
func urlName(host, path string) string {
	path = strings.Trim(path, "/")
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		path = path[i+1:]
	}
	if path != "" {
		return path
	}
	return host
}
