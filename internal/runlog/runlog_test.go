package runlog

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAppendFloat(t *testing.T) {
	cases := []struct {
		v    float64
		want string
	}{
		{math.Log(2), "0.6931472"}, // float32 precision, not 0.6931471805599453
		{1e-6, "1e-06"},
		{2e-5 * 0.5, "1e-05"},
		{0.1 + 0.2, "0.3"}, // not 0.30000000000000004
		{3, "3"},
		{-17, "-17"},
		{0, "0"},
		{1 << 60, "1.1529215e+18"},
		{1e-300, "1e-300"}, // below float32: full precision
		{1e300, "1e+300"},
		{math.NaN(), `"NaN"`},
		{math.Inf(1), `"Infinity"`},
		{math.Inf(-1), `"-Infinity"`},
	}
	for _, c := range cases {
		if got := string(AppendFloat(nil, c.v)); got != c.want {
			t.Errorf("AppendFloat(%v) = %s, want %s", c.v, got, c.want)
		}
	}
}

func TestRecord_OrderAndRoundTrip(t *testing.T) {
	r := Record{Step: 10, Epoch: 0.25, Metrics: map[string]float64{
		"rewards/margins": 0.5, "learning_rate": 1e-6, "loss": math.Log(2), "grad_norm": math.NaN(),
		"kl": math.Inf(1), "rewards/chosen": -0.125,
	}}
	line, _ := r.MarshalJSON()
	want := `{"step":10,"epoch":0.25,"loss":0.6931472,"grad_norm":"NaN","learning_rate":1e-06,` +
		`"kl":"Infinity","rewards/chosen":-0.125,"rewards/margins":0.5}`
	if string(line) != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	if !json.Valid(line) {
		t.Fatal("not valid JSON")
	}
	back, err := ParseRecord(line)
	if err != nil {
		t.Fatal(err)
	}
	if back.Step != 10 || back.Epoch != 0.25 || !math.IsNaN(back.Metrics["grad_norm"]) ||
		!math.IsInf(back.Metrics["kl"], 1) || float32(back.Metrics["loss"]) != float32(math.Log(2)) {
		t.Errorf("round trip: %+v", back)
	}
	if r, err := ParseRecord([]byte(`{"step":1,"loss":null}`)); err != nil || !math.IsNaN(r.Metrics["loss"]) {
		t.Errorf("null: %+v %v", r, err)
	}
}

func TestParseRecord_Errors(t *testing.T) {
	for line, want := range map[string]string{
		`{"loss":1}`:               `missing "step"`,
		`{"step":1.5}`:             `"step": want an integer`,
		`{"step":1,"loss":"high"}`: `"loss": want a number, got "high"`,
		`{"step":1,"loss":[1]}`:    `"loss": want a number`,
		`[1,2]`:                    `invalid JSON`,
		`{"step":1`:                `invalid JSON`,
		`null`:                     `want a JSON object`,
	} {
		if _, err := ParseRecord([]byte(line)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", line, err, want)
		}
	}
}

func writeRecords(t *testing.T, m *Metrics, steps ...int) {
	t.Helper()
	for _, s := range steps {
		if _, err := m.Write(Record{Step: s, Metrics: map[string]float64{"loss": float64(s)}}); err != nil {
			t.Fatal(err)
		}
	}
}

func steps(t *testing.T, dir string) []int {
	t.Helper()
	rs, err := ReadMetrics(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, r := range rs {
		out = append(out, r.Step)
	}
	return out
}

func TestMetrics_FreshAndResume(t *testing.T) {
	dir := t.TempDir()
	m, err := OpenMetrics(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, m, 1, 2, 3, 4)
	m.Close()
	// Resume from checkpoint-2: steps 3 and 4 are dropped and logged again.
	m, err = OpenMetrics(dir, 2)
	if err != nil {
		t.Fatal(err)
	}
	writeRecords(t, m, 3)
	m.Close()
	if got := steps(t, dir); !reflect.DeepEqual(got, []int{1, 2, 3}) {
		t.Errorf("after resume: steps %v, want [1 2 3]", got)
	}
	// A line cut short by a crash is dropped on resume.
	path := filepath.Join(dir, MetricsName)
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"step":4,"lo`)
	f.Close()
	m, err = OpenMetrics(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
	if got := steps(t, dir); !reflect.DeepEqual(got, []int{1, 2, 3}) {
		t.Errorf("after crash: steps %v", got)
	}
	// A fresh run starts the file over.
	m, _ = OpenMetrics(dir, 0)
	writeRecords(t, m, 1)
	m.Close()
	if got := steps(t, dir); !reflect.DeepEqual(got, []int{1}) {
		t.Errorf("fresh run: steps %v, want [1]", got)
	}
}

func TestReadMetrics_ErrorNamesFileLine(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, MetricsName)
	os.WriteFile(path, []byte("{\"step\":1,\"loss\":1}\n\n{\"step\":2,\"loss\":oops}\n"), 0o644)
	_, err := ReadMetrics(dir)
	if err == nil || !strings.HasPrefix(err.Error(), path+":3: invalid JSON") {
		t.Errorf("got %v, want %s:3: invalid JSON...", err, path)
	}
	if _, err := OpenMetrics(dir, 1); err == nil || !strings.Contains(err.Error(), path+":3:") {
		t.Errorf("resume over a malformed line: got %v", err)
	}
	if _, err := ReadMetrics(filepath.Join(dir, "none")); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("missing file: %v", err)
	}
}

func TestCompletions(t *testing.T) {
	dir := t.TempDir()
	c, err := OpenCompletions(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Write(
		Completion{Step: 5, Prompt: "7×8=\"?\"\n", Completion: "56<|im_end|>", Rewards: map[string]float64{"mult": 1, "format": math.NaN()}, Advantage: 0.75},
		Completion{Step: 5, Prompt: "p", Completion: "", Advantage: -1},
	)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	data, _ := os.ReadFile(filepath.Join(dir, CompletionsName))
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	want0 := `{"step":5,"prompt":"7×8=\"?\"\n","completion":"56\u003c|im_end|\u003e","rewards":{"format":"NaN","mult":1},"advantage":0.75}`
	if len(lines) != 2 || lines[0] != want0 {
		t.Fatalf("got %q\nwant %s", lines, want0)
	}
	for _, l := range lines {
		var v map[string]any
		if err := json.Unmarshal([]byte(l), &v); err != nil || v["step"] != 5.0 {
			t.Errorf("line %s: %v %v", l, v, err)
		}
	}
}

// fakeClock advances by the given durations.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestProgress_Plain(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, 10, 0)
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p.Now = clk.now
	if p.Terminal {
		t.Fatal("a buffer is not a terminal")
	}
	p.Step(1)
	clk.t = clk.t.Add(4 * time.Second)
	p.Step(5)
	p.Log(Record{Step: 5, Epoch: 0.5, Metrics: map[string]float64{"loss": math.Log(2), "learning_rate": 1e-6}})
	got := buf.String()
	for _, want := range []string{"msg=train", "step=5", "total=10", "epoch=0.5", "loss=0.6931472", "learning_rate=1e-06", "it/s=1", "eta=00:05"} {
		if !strings.Contains(got, want) {
			t.Errorf("log line %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "\r") || strings.Count(got, "\n") != 1 {
		t.Errorf("want exactly one plain line, got %q", got)
	}
	buf.Reset()
	p.Log(Record{Step: 5, Epoch: 0.5, Metrics: map[string]float64{"eval_loss": 0.5, "eval_runtime": 0.1}})
	if got := buf.String(); !strings.Contains(got, "msg=eval") || !strings.Contains(got, "eval_loss=0.5") || strings.Contains(got, "it/s") {
		t.Errorf("eval line %q: want msg=eval with its metrics and no training rate", got)
	}
}

func TestRecord_IsEval(t *testing.T) {
	for _, c := range []struct {
		m    map[string]float64
		want bool
	}{
		{map[string]float64{"eval_loss": 1, "eval_runtime": 2}, true},
		{map[string]float64{"eval_reward": 1}, true},
		{map[string]float64{"loss": 1, "grad_norm": 2}, false},
		{map[string]float64{"loss": 1, "eval_x": 2}, false},
		{map[string]float64{}, false},
	} {
		if got := (Record{Metrics: c.m}).IsEval(); got != c.want {
			t.Errorf("%v: IsEval %v, want %v", c.m, got, c.want)
		}
	}
}

func TestProgress_TerminalBar(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf, 10, 0)
	p.Terminal = true
	clk := &fakeClock{t: time.Unix(1000, 0)}
	p.Now = clk.now
	p.Step(1) // compilation step: the rate is measured from here
	if !strings.Contains(buf.String(), "step 1/10 [##------------------]  10% | ? it/s | ETA ?") {
		t.Errorf("first draw %q", buf.String())
	}
	clk.t = clk.t.Add(2 * time.Second)
	p.Step(5)
	p.Log(Record{Step: 5, Metrics: map[string]float64{"loss": 0.5}})
	last := buf.String()[strings.LastIndex(buf.String(), "\r"):]
	want := "\r\x1b[Kstep 5/10 [##########----------]  50% | 2.00 it/s | ETA 00:03 | loss 0.5000"
	if last != want {
		t.Errorf("bar %q\nwant %q", last, want)
	}
	buf.Reset()
	p.Write([]byte("level=WARN msg=hello\n"))
	if got := buf.String(); !strings.HasPrefix(got, "\r\x1b[Klevel=WARN msg=hello\n\r\x1b[Kstep 5/10") {
		t.Errorf("write above the bar: %q", got)
	}
	buf.Reset()
	clk.t = clk.t.Add(50 * time.Millisecond)
	p.Step(6) // within 100 ms: not redrawn
	if buf.Len() != 0 {
		t.Errorf("redrawn within 100ms: %q", buf.String())
	}
	clk.t = clk.t.Add(10 * time.Second)
	p.Step(10)
	p.Done()
	if got := buf.String(); !strings.Contains(got, "step 10/10 [####################] 100%") || !strings.HasSuffix(got, "\n") {
		t.Errorf("final %q", got)
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "00:00", 61 * time.Second: "01:01", 3725 * time.Second: "1:02:05"} {
		if got := formatDuration(d); got != want {
			t.Errorf("%v: got %s, want %s", d, got, want)
		}
	}
}
