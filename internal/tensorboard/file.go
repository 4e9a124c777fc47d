package tensorboard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// Writer appends events to one event file.
type Writer struct {
	path string
	f    *os.File
}

var fileSeq atomic.Int64

// fileName is the name TensorFlow's and PyTorch's writers give an event file:
// events.out.tfevents.<unix seconds, 10 digits>.<hostname>.<pid>.<sequence number>.
func fileName(now time.Time) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("events.out.tfevents.%010d.%s.%d.%d", now.Unix(), host, os.Getpid(), fileSeq.Add(1)-1)
}

// Create writes a new event file in dir (made if missing) holding the file_version header and
// events, atomically (a temporary renamed into place), and returns a Writer appending to it.
func Create(dir string, now time.Time, events ...Event) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	path := filepath.Join(dir, fileName(now))
	buf := AppendRecord(nil, Event{WallTime: seconds(now), FileVersion: FileVersion}.Marshal())
	for _, e := range events {
		buf = AppendRecord(buf, e.Marshal())
	}
	tmp := filepath.Join(dir, "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, buf, 0o644); err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	return &Writer{path: path, f: f}, nil
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Write appends events with one write call (no buffering: a line of metrics.jsonl and its
// scalars reach the disk together).
func (w *Writer) Write(events ...Event) error {
	var buf []byte
	for _, e := range events {
		buf = AppendRecord(buf, e.Marshal())
	}
	if _, err := w.f.Write(buf); err != nil {
		return fmt.Errorf("write %s: %w", w.path, err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error {
	if err := w.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", w.path, err)
	}
	return nil
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// IsEventFile reports whether name is an event file, as TensorBoard tells them
// (io_wrapper.IsTensorFlowEventsFile: "tfevents" in the name); temporaries (".name.tmp") are not.
func IsEventFile(name string) bool {
	return strings.Contains(name, "tfevents") && !strings.HasPrefix(name, ".")
}

// EventFiles returns the event files of dir in name order (TensorBoard's reading order; the names
// begin with the creation time). A missing dir has none.
func EventFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.Type().IsRegular() && IsEventFile(e.Name()) {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	sort.Strings(out)
	return out, nil
}

// ReadFile reads every event of an event file. A last record cut short (a writer killed
// mid-write) ends the file, as TensorBoard reads it; a CRC mismatch or an undecodable event is an
// error naming the file and the record.
func ReadFile(path string) ([]Event, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	recs, err := ParseRecords(data)
	if err != nil && !errors.Is(err, ErrTruncated) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := make([]Event, 0, len(recs))
	for i, r := range recs {
		e, err := Unmarshal(r)
		if err != nil {
			return nil, fmt.Errorf("%s: record %d: %w", path, i, err)
		}
		out = append(out, e)
	}
	if len(out) == 0 || out[0].FileVersion == "" {
		return nil, fmt.Errorf("%s: not an event file: the first event has no file_version", path)
	}
	return out, nil
}

// ReadDir reads the events of dir's event files, file after file in name order, as written (no
// restart is applied: a SessionLog START stays one event of the list).
func ReadDir(dir string) ([]Event, error) {
	files, err := EventFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, f := range files {
		evs, err := ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// Scalar is one value of a tag at a step.
type Scalar struct {
	Tag   string
	Step  int64
	Value float32
}

// Scalars lists the scalar values of events in order.
func Scalars(events []Event) []Scalar {
	var out []Scalar
	for _, e := range events {
		for _, v := range e.Values {
			out = append(out, Scalar{Tag: v.Tag, Step: e.Step, Value: v.Simple})
		}
	}
	return out
}
