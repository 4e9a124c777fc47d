package runlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// File names inside OUTPUT_DIR.
const (
	MetricsName     = "metrics.jsonl"
	CompletionsName = "completions.jsonl"
)

// jsonl is an append-only JSON-lines file whose lines carry a "step".
type jsonl struct {
	path string
	f    *os.File
}

// openJSONL opens path for appending. resumeStep ≤ 0 starts the file afresh; otherwise the lines
// with step ≤ resumeStep are kept and later ones dropped (they were logged after the checkpoint
// the run resumes from, and will be logged again).
func openJSONL(path string, resumeStep int) (*jsonl, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if resumeStep > 0 {
		if err := truncateAfter(path, resumeStep); err != nil {
			return nil, err
		}
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if resumeStep <= 0 {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &jsonl{path: path, f: f}, nil
}

// truncateAfter rewrites path (atomically) without its lines whose step is > step.
func truncateAfter(path string, step int) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("resume %s: %w", path, err)
	}
	var kept bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var head struct {
			Step *int `json:"step"`
		}
		if err := json.Unmarshal(line, &head); err != nil || head.Step == nil {
			if n == lineCount(data) && !bytes.HasSuffix(data, []byte("\n")) {
				break // a last line cut short by a crash
			}
			return fmt.Errorf("%s:%d: not a JSON object with a \"step\"", path, n)
		}
		if *head.Step <= step {
			kept.Write(line)
			kept.WriteByte('\n')
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("resume %s: %w", path, err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, kept.Bytes(), 0o644); err != nil {
		return fmt.Errorf("resume %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("resume %s: %w", path, err)
	}
	return nil
}

func lineCount(data []byte) int {
	n := bytes.Count(data, []byte("\n"))
	if len(data) > 0 && data[len(data)-1] != '\n' {
		n++
	}
	return n
}

// writeLine writes one line and returns it (without the newline).
func (j *jsonl) writeLine(line []byte) error {
	if _, err := j.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", j.path, err)
	}
	return nil
}

// Close closes the file.
func (j *jsonl) Close() error {
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", j.path, err)
	}
	return nil
}

// Metrics writes metrics.jsonl.
type Metrics struct{ *jsonl }

// OpenMetrics opens OUTPUT_DIR/metrics.jsonl. resumeStep ≤ 0 starts afresh; otherwise the lines
// after resumeStep are dropped and new ones appended.
func OpenMetrics(outputDir string, resumeStep int) (*Metrics, error) {
	j, err := openJSONL(filepath.Join(outputDir, MetricsName), resumeStep)
	if err != nil {
		return nil, err
	}
	return &Metrics{j}, nil
}

// Write appends r as one line and returns that line, for the checkpoint's log history.
func (m *Metrics) Write(r Record) (json.RawMessage, error) {
	line, _ := r.MarshalJSON()
	return line, m.writeLine(line)
}

// Completion is one sampled completion, as TRL's completions table: step, prompt, completion,
// the reward of each function (NaN when a function gave none) and the advantage; a multi-turn
// completion (tools) has its conversation too.
type Completion struct {
	Step       int
	Prompt     string
	Completion string
	Rewards    map[string]float64 // reward function name → reward
	Advantage  float64
	// Conversation is the completion's turns as a JSON list of messages; nil for none.
	Conversation json.RawMessage
}

// MarshalJSON writes {"step":..,"prompt":..,"completion":..,["conversation":[..],]"rewards":{..},"advantage":..}.
func (c Completion) MarshalJSON() ([]byte, error) {
	buf := []byte(`{"step":`)
	buf = strconv.AppendInt(buf, int64(c.Step), 10)
	for _, kv := range [][2]string{{"prompt", c.Prompt}, {"completion", c.Completion}} {
		s, err := json.Marshal(kv[1])
		if err != nil {
			return nil, err
		}
		buf = append(buf, `,"`+kv[0]+`":`...)
		buf = append(buf, s...)
	}
	if c.Conversation != nil {
		buf = append(append(buf, `,"conversation":`...), c.Conversation...)
	}
	buf = append(buf, `,"rewards":`...)
	buf = appendObject(buf, c.Rewards)
	buf = append(buf, `,"advantage":`...)
	buf = AppendFloat(buf, c.Advantage)
	return append(buf, '}'), nil
}

func appendObject(buf []byte, m map[string]float64) []byte {
	buf = append(buf, '{')
	for i, k := range (Record{Metrics: m}).Keys() {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendQuote(buf, k)
		buf = append(buf, ':')
		buf = AppendFloat(buf, m[k])
	}
	return append(buf, '}')
}

// Completions writes completions.jsonl.
type Completions struct{ *jsonl }

// OpenCompletions opens OUTPUT_DIR/completions.jsonl, with OpenMetrics' resume rule.
func OpenCompletions(outputDir string, resumeStep int) (*Completions, error) {
	j, err := openJSONL(filepath.Join(outputDir, CompletionsName), resumeStep)
	if err != nil {
		return nil, err
	}
	return &Completions{j}, nil
}

// Write appends one line per completion.
func (c *Completions) Write(cs ...Completion) error {
	var buf []byte
	for _, x := range cs {
		line, err := x.MarshalJSON()
		if err != nil {
			return fmt.Errorf("write %s: %w", c.path, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	if _, err := c.f.Write(buf); err != nil {
		return fmt.Errorf("write %s: %w", c.path, err)
	}
	return nil
}

// ReadMetrics reads a metrics.jsonl file (or RUN_DIR/metrics.jsonl when path is a directory).
// A malformed line is an error naming path:line; blank lines are skipped.
func ReadMetrics(path string) ([]Record, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, MetricsName)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read metrics: %w", err)
	}
	var out []Record
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		r, err := ParseRecord(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return out, nil
}
