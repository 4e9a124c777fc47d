package tensorboard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/posttrain/posttrain/internal/runlog"
)

// RunsDir is the directory of OUTPUT_DIR that holds the TensorBoard runs: HF's logging_dir
// defaults to output_dir/runs/CURRENT_DATETIME_HOSTNAME (training_args.default_logdir).
const RunsDir = "runs"

// runName is HF's default_logdir name: datetime.now().strftime("%b%d_%H-%M-%S") + "_" + hostname.
func runName(now time.Time) string {
	host, _ := os.Hostname()
	return now.Format("Jan02_15-04-05") + "_" + host
}

// Tag is the TensorBoard tag of a metrics.jsonl key, as HF's rewrite_logs names it for
// TensorBoardCallback: eval_X → eval/X, test_X → test/X, anything else X → train/X (loss →
// train/loss, rewards/chosen → train/rewards/chosen, eval_loss → eval/loss).
func Tag(key string) string {
	if s, ok := strings.CutPrefix(key, "eval_"); ok {
		return "eval/" + s
	}
	if s, ok := strings.CutPrefix(key, "test_"); ok {
		return "test/" + s
	}
	return "train/" + key
}

// Run writes a training run's metrics.jsonl records as TensorBoard scalars, one event per value
// at the record's global step (as HF's TensorBoardCallback.on_log calls add_scalar), the record's
// epoch as train/epoch.
type Run struct {
	w         *Writer
	dir       string
	epochStep int64 // the step train/epoch was last written at
}

// OpenRun opens the TensorBoard run of OUTPUT_DIR. resumeStep ≤ 0 starts a new run,
// OUTPUT_DIR/runs/<Mon DD_HH-MM-SS>_<hostname> (HF's name). A resume (resumeStep > 0) continues
// the latest run directory there (the one whose event file was written last), as metrics.jsonl
// continues: the scalars at steps ≤ resumeStep are kept, one per (tag, step), the later ones
// dropped (they are logged again). Event files are append-only, so the kept events are rewritten
// into a new event file (atomically, then the old files are removed) that begins, after its
// header, with a SessionLog START at step 0: a TensorBoard already watching the directory drops
// what it read from the old files (its restart rule: data at steps ≥ the START's step goes) and
// reads the kept events again, so it shows one curve too. With no run directory to continue (the
// run had report_to none until now), a new one is started.
func OpenRun(outputDir string, resumeStep int, now time.Time) (*Run, error) {
	runs := filepath.Join(outputDir, RunsDir)
	if resumeStep > 0 {
		dir, err := latestRun(runs)
		if err != nil {
			return nil, err
		}
		if dir != "" {
			return resumeRun(dir, int64(resumeStep), now)
		}
	}
	dir := filepath.Join(runs, runName(now))
	w, err := Create(dir, now)
	if err != nil {
		return nil, err
	}
	return &Run{w: w, dir: dir, epochStep: -1}, nil
}

// latestRun returns the directory under runs whose newest event file was modified last, or ""
// when none holds an event file.
func latestRun(runs string) (string, error) {
	entries, err := os.ReadDir(runs)
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("tensorboard: %w", err)
	}
	var best string
	var bestTime time.Time
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(runs, e.Name())
		files, err := EventFiles(dir)
		if err != nil {
			return "", err
		}
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				return "", fmt.Errorf("tensorboard: %w", err)
			}
			if best == "" || fi.ModTime().After(bestTime) {
				best, bestTime = dir, fi.ModTime()
			}
		}
	}
	return best, nil
}

// resumeRun rewrites dir's events at steps ≤ step into a new event file and removes the old ones.
func resumeRun(dir string, step int64, now time.Time) (*Run, error) {
	old, err := EventFiles(dir)
	if err != nil {
		return nil, err
	}
	events, err := ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("resume the TensorBoard run: %w", err)
	}
	type key struct {
		tag  string
		step int64
	}
	at := map[key]int{} // index in kept
	kept := []Event{{WallTime: seconds(now), SessionStart: true}}
	r := &Run{dir: dir, epochStep: -1}
	for _, e := range events {
		if e.Step > step {
			continue
		}
		for _, v := range e.Values {
			one := Event{WallTime: e.WallTime, Step: e.Step, Values: []Value{v}}
			if i, ok := at[key{v.Tag, e.Step}]; ok {
				kept[i] = one // a duplicate (a resume killed before removing the old files): the last one
				continue
			}
			at[key{v.Tag, e.Step}] = len(kept)
			kept = append(kept, one)
			if v.Tag == epochTag && e.Step > r.epochStep {
				r.epochStep = e.Step
			}
		}
	}
	if r.w, err = Create(dir, now, kept...); err != nil {
		return nil, err
	}
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			r.w.Close()
			return nil, fmt.Errorf("tensorboard: %w", err)
		}
	}
	return r, nil
}

const epochTag = "train/epoch"

// Dir is the run's directory (OUTPUT_DIR/runs/NAME).
func (r *Run) Dir() string { return r.dir }

// Write appends rec's metrics as scalars at rec.Step, in metrics.jsonl's order, then its epoch as
// train/epoch. HF's Trainer logs the epoch with every line, evaluation lines too, so at a step
// with both a training and an evaluation line its TensorBoard gets train/epoch twice; posttrain
// writes it once per step (the value is the same).
func (r *Run) Write(rec runlog.Record) error {
	wall := seconds(time.Now())
	step := int64(rec.Step)
	keys := rec.Keys()
	events := make([]Event, 0, len(keys)+1)
	for _, k := range keys {
		events = append(events, Event{WallTime: wall, Step: step, Values: []Value{{Tag: Tag(k), Simple: float32(rec.Metrics[k])}}})
	}
	if step != r.epochStep {
		events = append(events, Event{WallTime: wall, Step: step, Values: []Value{{Tag: epochTag, Simple: float32(rec.Epoch)}}})
		r.epochStep = step
	}
	return r.w.Write(events...)
}

// Close closes the event file.
func (r *Run) Close() error { return r.w.Close() }
