package tensorboard

import (
	"errors"
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
// the latest run directory there (the one whose event file was written last) as metrics.jsonl
// continues: the events at steps ≤ resumeStep are kept, the later ones dropped (they are logged
// again). Each event file of the directory loses its events at steps > resumeStep: cut off where
// they begin (they are the file's tail, as events are written in step order), or, when kept events
// follow dropped ones, the file is rewritten without them (a temporary renamed over it). A last
// record cut short by a killed writer goes too. The run then continues in a new event file that
// begins, after its header, with a SessionLog START at resumeStep+1, as PyTorch's SummaryWriter
// writes for purge_step: a TensorBoard that read the dropped events before the resume drops them
// when it reads the START (its restart rule: everything at steps ≥ the START's step goes), so it
// shows one curve without a restart; a fresh reader sees each (tag, step) of metrics.jsonl once.
// With no run directory to continue (the run had report_to none until now), a new one is started.
//
// A new run's file also begins with a SessionLog START (at step 0, or at resumeStep+1), as
// TensorFlow's Supervisor writes one when a session starts: TensorBoard's server
// (plugin_event_accumulator) takes a run's first START for the session's start and only the later
// ones for restarts, so the resume's START must not be the first.
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
	start := int64(0)
	if resumeStep > 0 {
		start = int64(resumeStep) + 1
	}
	dir := filepath.Join(runs, runName(now))
	w, err := Create(dir, now, Event{WallTime: seconds(now), Step: start, SessionStart: true})
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

// resumeRun drops dir's events at steps > step and opens a new event file after a SessionLog
// START at step+1.
func resumeRun(dir string, step int64, now time.Time) (*Run, error) {
	files, err := EventFiles(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{dir: dir, epochStep: -1}
	for _, f := range files {
		if err := r.dropAfter(f, step); err != nil {
			return nil, fmt.Errorf("resume the TensorBoard run: %w", err)
		}
	}
	if r.w, err = Create(dir, now, Event{WallTime: seconds(now), Step: step + 1, SessionStart: true}); err != nil {
		return nil, err
	}
	return r, nil
}

// dropAfter removes path's events at steps > step (the file_version header stays) and notes the
// last step of train/epoch kept.
func (r *Run) dropAfter(path string, step int64) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	recs, err := ParseRecords(data)
	if err != nil && !errors.Is(err, ErrTruncated) {
		return fmt.Errorf("%s: %w", path, err)
	}
	var kept []byte
	end, keptEnd, contiguous := 0, 0, true
	for i, rec := range recs {
		e, err := Unmarshal(rec)
		if err != nil {
			return fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		next := end + len(rec) + 16
		if e.FileVersion != "" || e.Step <= step {
			kept = append(kept, data[end:next]...)
			if keptEnd != end {
				contiguous = false
			}
			keptEnd = next
			for _, v := range e.Values {
				if v.Tag == epochTag {
					r.epochStep = max(r.epochStep, e.Step)
				}
			}
		}
		end = next
	}
	switch {
	case keptEnd == len(data):
		return nil // nothing dropped
	case contiguous:
		return os.Truncate(path, int64(keptEnd))
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, kept, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
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
