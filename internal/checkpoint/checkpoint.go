// Package checkpoint writes and reads HF-Trainer-style checkpoint directories:
// OUTPUT_DIR/checkpoint-N/ holding trainer_state.json plus the files the trainer provides (model
// weights and config, optimizer state, ...). A checkpoint is written under a temporary name,
// fsynced, then renamed, so a crash never leaves a half-written checkpoint-N; save_total_limit
// prunes the oldest ones (renamed out of sight first, then deleted). It also owns the output
// directory's rules at the start of a run (Run.Start): a previous run needs resume or
// overwrite_output_dir, and the temporaries of a killed run are removed.
package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// StateName is the trainer-state file of every checkpoint, as in HF Trainer.
const StateName = "trainer_state.json"

// Prefix is the directory-name prefix of checkpoints: checkpoint-<global step>.
const Prefix = "checkpoint-"

// State is trainer_state.json: HF Trainer's keys (global_step, epoch, log_history, best_metric,
// ...) plus what posttrain needs to continue exactly: the data position and the RNG states.
type State struct {
	GlobalStep          int               `json:"global_step"`
	Epoch               float64           `json:"epoch"` // fractional epochs done, as HF logs it
	MaxSteps            int               `json:"max_steps"`
	NumTrainEpochs      float64           `json:"num_train_epochs"`
	LoggingSteps        int               `json:"logging_steps"`
	SaveSteps           int               `json:"save_steps"`
	TrainBatchSize      int               `json:"train_batch_size"`
	NumInputTokensSeen  int64             `json:"num_input_tokens_seen"`
	BestMetric          *float64          `json:"best_metric"` // must be finite: JSON has no NaN
	BestModelCheckpoint *string           `json:"best_model_checkpoint"`
	LogHistory          []json.RawMessage `json:"log_history"` // metrics lines (runlog.Record JSON)

	// posttrain additions.
	Data  DataPosition               `json:"data_position"`
	RNG   map[string][]uint64        `json:"rng_state,omitempty"` // generator name → state words
	Extra map[string]json.RawMessage `json:"extra,omitempty"`     // trainer-specific state
	Files []string                   `json:"files"`               // the other files, checked on load
	// Sizes are the files' sizes in bytes (a directory: the sum of its regular files), checked on
	// load: a truncated or replaced file is an error, not a silent resume.
	Sizes map[string]int64 `json:"file_sizes"`
	// Method is the trainer that wrote the checkpoint ("sft", "grpo", ...); Fingerprints identify
	// what the run read (model, dataset) so that a resume can check it reads the same.
	Method       string            `json:"method,omitempty"`
	Fingerprints map[string]string `json:"fingerprints,omitempty"`
}

// DataPosition is where the data loader stands: the next example is number Offset (in the
// shuffled order of pass Epoch, which the trainer derives from the seed and Epoch).
type DataPosition struct {
	Epoch  int `json:"epoch"`  // completed passes over the data
	Offset int `json:"offset"` // examples consumed in the current pass
}

// AppendLog appends one metrics line to LogHistory, keeping the last max lines (max ≤ 0: all).
func (s *State) AppendLog(line json.RawMessage, max int) {
	s.LogHistory = append(s.LogHistory, line)
	if max > 0 && len(s.LogHistory) > max {
		s.LogHistory = slices.Clone(s.LogHistory[len(s.LogHistory)-max:])
	}
}

// WriteFunc writes one file (or directory) of a checkpoint at path, e.g. the optimizer state as
// safetensors. path does not exist yet; its parent does.
type WriteFunc func(path string) error

// Checkpoint is one complete checkpoint directory.
type Checkpoint struct {
	Dir  string
	Step int
}

// ErrNoCheckpoint is returned by Latest when the output directory holds no complete checkpoint.
var ErrNoCheckpoint = errors.New("no checkpoint")

// Dir returns OUTPUT_DIR/checkpoint-<step>.
func Dir(outputDir string, step int) string {
	return filepath.Join(outputDir, Prefix+strconv.Itoa(step))
}

// List returns the complete checkpoints (with a trainer_state.json) of outputDir by step.
// A missing outputDir has none.
func List(outputDir string) ([]Checkpoint, error) {
	entries, err := os.ReadDir(outputDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list checkpoints: %w", err)
	}
	var out []Checkpoint
	for _, e := range entries {
		step, ok := stepOf(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		dir := filepath.Join(outputDir, e.Name())
		if _, err := os.Stat(filepath.Join(dir, StateName)); err == nil {
			out = append(out, Checkpoint{Dir: dir, Step: step})
		}
	}
	slices.SortFunc(out, func(a, b Checkpoint) int { return a.Step - b.Step })
	return out, nil
}

// highest returns the highest step of the checkpoint-N directories of outputDir, complete or not.
func highest(outputDir string) (int, bool) {
	entries, _ := os.ReadDir(outputDir)
	top, found := 0, false
	for _, e := range entries {
		if step, ok := stepOf(e.Name()); ok && e.IsDir() && (!found || step > top) {
			top, found = step, true
		}
	}
	return top, found
}

func stepOf(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, Prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0 && strconv.Itoa(n) == s
}

// Latest returns the directory of the checkpoint with the highest step in outputDir, or an error
// wrapping ErrNoCheckpoint. A checkpoint-N directory above every complete one but without
// trainer_state.json (copied in part, or written by something else) is an error naming it, not
// skipped: resuming from an older checkpoint would silently drop its steps.
func Latest(outputDir string) (string, error) {
	cps, err := List(outputDir)
	if err != nil {
		return "", err
	}
	if top, ok := highest(outputDir); ok && (len(cps) == 0 || top > cps[len(cps)-1].Step) {
		dir := Dir(outputDir, top)
		older := "there is no complete checkpoint to resume from"
		if len(cps) > 0 {
			older = "remove it to resume from " + cps[len(cps)-1].Dir
		}
		return "", fmt.Errorf("%s, the latest checkpoint, is incomplete (no %s): %s, or name one with --resume-from-checkpoint", dir, StateName, older)
	}
	if len(cps) == 0 {
		return "", fmt.Errorf("%s: %w (no %sN/%s)", outputDir, ErrNoCheckpoint, Prefix, StateName)
	}
	return cps[len(cps)-1].Dir, nil
}

// ResumeDir resolves the --resume / --resume-from-checkpoint options: an explicit checkpoint path
// wins, resume picks the latest in outputDir, neither returns "" (start from scratch).
func ResumeDir(outputDir string, resume bool, path string) (string, error) {
	switch {
	case path != "":
		if _, err := os.Stat(filepath.Join(path, StateName)); err != nil {
			return "", fmt.Errorf("resume from %s: not a checkpoint directory (no %s)", path, StateName)
		}
		return path, nil
	case resume:
		dir, err := Latest(outputDir)
		if err != nil {
			return "", fmt.Errorf("resume: %w", err)
		}
		return dir, nil
	}
	return "", nil
}

// Load reads dir/trainer_state.json and validates it before anything else is read: the step is
// within bounds and matches the directory's name, the data position is not negative, and every
// file it lists is present with the size it was saved with. Each failure is one line naming the
// file and the field.
func Load(dir string) (*State, error) {
	path := filepath.Join(dir, StateName)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load checkpoint: %w", err)
	}
	var st State
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("load checkpoint %s: %w", path, err)
	}
	// Give back the raw lines as compact as they were saved (the file is indented).
	for i, raw := range st.LogHistory {
		st.LogHistory[i] = compact(raw)
	}
	for k, raw := range st.Extra {
		st.Extra[k] = compact(raw)
	}
	if err := st.validate(dir); err != nil {
		return nil, fmt.Errorf("load checkpoint: %s: %w", path, err)
	}
	return &st, nil
}

// validate checks the fields Load promises to check.
func (st *State) validate(dir string) error {
	switch {
	case st.GlobalStep < 1:
		return fmt.Errorf("global_step %d: a checkpoint is saved after a step (≥ 1)", st.GlobalStep)
	case st.MaxSteps > 0 && st.GlobalStep > st.MaxSteps:
		return fmt.Errorf("global_step %d is past max_steps %d", st.GlobalStep, st.MaxSteps)
	case st.Data.Epoch < 0 || st.Data.Offset < 0:
		return fmt.Errorf("data_position %+v is negative", st.Data)
	case st.NumInputTokensSeen < 0:
		return fmt.Errorf("num_input_tokens_seen %d is negative", st.NumInputTokensSeen)
	}
	if step, ok := stepOf(filepath.Base(filepath.Clean(dir))); ok && step != st.GlobalStep {
		return fmt.Errorf("global_step %d does not match the directory name %s (edited or copied?)", st.GlobalStep, filepath.Base(dir))
	}
	if st.Sizes == nil {
		return fmt.Errorf("no file_sizes (written by a posttrain before checkpoints recorded them): the files cannot be checked; start a new run")
	}
	for _, name := range st.Files {
		if err := checkName(name); err != nil {
			return fmt.Errorf("files: %w", err)
		}
		want, ok := st.Sizes[name]
		if !ok {
			return fmt.Errorf("file_sizes has no entry for %s", name)
		}
		got, err := size(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("file %s listed in files is missing", name)
		}
		if got != want {
			return fmt.Errorf("file %s is %d bytes, file_sizes says %d (truncated or replaced?)", name, got, want)
		}
	}
	return nil
}

// size is the size of a regular file, or the sum of the regular files under a directory.
func size(path string) (int64, error) {
	var n int64
	err := filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

func compact(raw json.RawMessage) json.RawMessage {
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return raw
	}
	return buf.Bytes()
}

// Prune deletes the oldest complete checkpoints of outputDir until at most limit remain, never
// deleting keep (the one just written). limit ≤ 0 keeps all (HF save_total_limit None). Each one
// is first renamed out of its visible name to .deleting-checkpoint-N (and the directory synced),
// then deleted, so a kill in between leaves no partial checkpoint-N, only a hidden temporary that
// the next run's Start removes.
func Prune(outputDir string, limit int, keep string) error {
	if limit <= 0 {
		return nil
	}
	cps, err := List(outputDir)
	if err != nil {
		return err
	}
	excess := len(cps) - limit
	for _, cp := range cps {
		if excess <= 0 {
			break
		}
		if filepath.Clean(cp.Dir) == filepath.Clean(keep) {
			continue
		}
		if err := retire(outputDir, cp.Dir); err != nil {
			return fmt.Errorf("prune checkpoint: %w", err)
		}
		excess--
	}
	return nil
}

// retire renames the checkpoint dir to a hidden .deleting-checkpoint-N, syncs outputDir so that
// the rename is durable, then deletes it.
func retire(outputDir, dir string) error {
	hidden := filepath.Join(outputDir, ".deleting-"+filepath.Base(dir))
	if err := os.RemoveAll(hidden); err != nil { // left by an earlier rotation that was killed
		return err
	}
	if err := os.Rename(dir, hidden); err != nil {
		return err
	}
	if err := syncPath(outputDir); err != nil {
		return err
	}
	Fault(PhasePruneRenamed)
	if err := os.RemoveAll(hidden); err != nil {
		return err
	}
	Fault(PhasePruneDeleted)
	return nil
}
