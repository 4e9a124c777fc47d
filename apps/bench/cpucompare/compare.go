package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MaxLoadGap is the largest difference between the 1-minute load averages read right before the
// posttrain side and the PyTorch side of one round for which the round's ratio is reported.
const MaxLoadGap = 1.0

// MinRounds is the number of rounds below which the table is marked as a quick look.
const MinRounds = 3

// Side names, as scripts/bench-cpu.sh writes them in the sides file.
const (
	SideXLA     = "xla:cpu" // posttrain on xla:cpu
	SideGo      = "go"      // posttrain on the pure-Go backend
	SidePyTorch = "pytorch" // scripts/reference/cpu_bench.py
)

// Workload is one of BenchmarkCPU's workloads and the figure the table compares.
type Workload struct {
	Name  string
	Label string
	Key   string // figure compared: "s" (seconds, less is better) or "tokens_per_s" (more is better)
	Unit  string
}

// RateBetter reports whether more of the workload's figure is better (a rate, not a time).
func (w Workload) RateBetter() bool { return w.Key == "tokens_per_s" }

// Workloads are BenchmarkCPU's (bench/cpu_bench_test.go) and cpu_bench.py's, in table order.
var Workloads = []Workload{
	{"forward", "forward, log-probs of 2×64 tokens (eighth-width Qwen2.5, 37.2M parameters)", "s", "s"},
	{"adamw", "AdamW step (forward, backward, clip, update), same batch", "s", "s"},
	{"grpo", "GRPO step: 2×4 completions of 16 tokens sampled, scored, one update (eighth-width)", "s", "s"},
	{"decode", "decode, batch 1, Qwen2.5-0.5B shape (494M parameters), float32, KV cache", "tokens_per_s", "tokens/s"},
	{"decode_bf16", "decode, batch 1, Qwen2.5-0.5B shape, bfloat16, KV cache", "tokens_per_s", "tokens/s"},
}

// Figures are one side's results: workload → figure name → value (cpu_bench.py's keys: s,
// tokens_per_s, prefill_s, generate_s, update_s; posttrain's add compile_s, graphs, timed_compiles).
type Figures map[string]map[string]float64

// SideRun is one side of one round: a line of the sides file, and what the side measured.
type SideRun struct {
	Round int     `json:"round"`
	Side  string  `json:"side"`
	Start string  `json:"start"` // UTC, right before the side started
	Load1 float64 `json:"load1"` // 1-minute load average (/proc/loadavg) right before the side
	// Load1After is the 1-minute load average right after the side (its own threads included).
	Load1After float64 `json:"load1_after"`
	Seconds    float64 `json:"seconds"` // wall time of the whole side (process start, compilation, models)
	Exit       int     `json:"exit"`
	Output     string  `json:"output"` // the side's output file (go test -bench text or cpu_bench.py's JSON)
	Figures    Figures `json:"figures,omitempty"`
	// Raw is the side's output as measured: cpu_bench.py's JSON verbatim, or BenchmarkCPU's
	// result lines.
	Raw json.RawMessage `json:"raw,omitempty"`
}

// pytorchOutput is cpu_bench.py's JSON.
type pytorchOutput struct {
	Torch     string                    `json:"torch"`
	Threads   int                       `json:"threads"`
	Workloads map[string]map[string]any `json:"workloads"`
}

// ReadSides reads the sides file (JSON lines, see SideRun) and each side's output into Figures.
func ReadSides(path string) ([]SideRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []SideRun
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var r SideRun
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if err := r.readOutput(); err != nil {
			return nil, fmt.Errorf("round %d, %s: %w", r.Round, r.Side, err)
		}
		runs = append(runs, r)
	}
	return runs, sc.Err()
}

// readOutput fills Figures and Raw from the side's output file (absent after a failed side: none).
func (r *SideRun) readOutput() error {
	data, err := os.ReadFile(r.Output)
	if err != nil {
		if r.Exit != 0 {
			return nil
		}
		return err
	}
	if r.Side == SidePyTorch {
		var out pytorchOutput
		if err := json.Unmarshal(data, &out); err != nil {
			if r.Exit != 0 {
				return nil
			}
			return fmt.Errorf("%s: %w", r.Output, err)
		}
		r.Raw, r.Figures = json.RawMessage(data), numbers(out.Workloads)
		return nil
	}
	var lines []string
	r.Figures, lines = ParseGoBench(string(data))
	r.Raw, err = json.Marshal(lines)
	return err
}

// numbers keeps the numeric figures of cpu_bench.py's workloads (not e.g. "attn": "sdpa").
func numbers(ws map[string]map[string]any) Figures {
	out := Figures{}
	for w, kv := range ws {
		out[w] = map[string]float64{}
		for k, v := range kv {
			if x, ok := v.(float64); ok {
				out[w][k] = x
			}
		}
	}
	return out
}

// goMetrics maps BenchmarkCPU's units onto cpu_bench.py's keys.
var goMetrics = map[string]string{"s/op-median": "s", "s/step": "s", "tokens/s": "tokens_per_s", "prefill-s": "prefill_s",
	"generate-s": "generate_s", "update-s": "update_s", "compile-s": "compile_s", "graphs": "graphs",
	"timed-compiles": "timed_compiles"}

var benchLine = regexp.MustCompile(`^BenchmarkCPU/(\w+)(?:-\d+)?\s+\d+\s+(.*)$`)

// ParseGoBench reads BenchmarkCPU's figures from `go test -bench` output, and returns its result
// lines. Units other than goMetrics' (ns/op: the whole sub-benchmark, warm-up included) are left out.
func ParseGoBench(text string) (Figures, []string) {
	out := Figures{}
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lines = append(lines, line)
		vals := map[string]float64{}
		fields := strings.Fields(m[2])
		for i := 0; i+1 < len(fields); i += 2 {
			key, ok := goMetrics[fields[i+1]]
			v, err := strconv.ParseFloat(fields[i], 64)
			if ok && err == nil {
				vals[key] = v
			}
		}
		out[m[1]] = vals
	}
	return out, lines
}

// Round is one round's sides by name.
type Round struct {
	N     int
	Sides map[string]*SideRun
}

// GroupRounds orders the side runs by round; every round needs PyTorch and a posttrain side, all
// rounds the same posttrain sides, and every side must have exited 0.
func GroupRounds(runs []SideRun) ([]Round, error) {
	byN := map[int]*Round{}
	for i := range runs {
		r := &runs[i]
		if r.Side != SideXLA && r.Side != SideGo && r.Side != SidePyTorch {
			return nil, fmt.Errorf("round %d: unknown side %q", r.Round, r.Side)
		}
		if r.Exit != 0 {
			return nil, fmt.Errorf("round %d: %s failed (exit %d; its output: %s)", r.Round, sideName(r.Side), r.Exit, r.Output)
		}
		if byN[r.Round] == nil {
			byN[r.Round] = &Round{N: r.Round, Sides: map[string]*SideRun{}}
		}
		if byN[r.Round].Sides[r.Side] != nil {
			return nil, fmt.Errorf("round %d: %s twice", r.Round, sideName(r.Side))
		}
		byN[r.Round].Sides[r.Side] = r
	}
	var rounds []Round
	for _, n := range slices.Sorted(maps.Keys(byN)) {
		rounds = append(rounds, *byN[n])
	}
	if len(rounds) == 0 {
		return nil, fmt.Errorf("no rounds")
	}
	want := posttrainSides(rounds[0])
	for _, rd := range rounds {
		if rd.Sides[SidePyTorch] == nil {
			return nil, fmt.Errorf("round %d: no PyTorch side", rd.N)
		}
		if got := posttrainSides(rd); len(got) == 0 || !slices.Equal(got, want) {
			return nil, fmt.Errorf("round %d: posttrain sides %v, round %d's were %v", rd.N, got, rounds[0].N, want)
		}
	}
	return rounds, nil
}

// posttrainSides are the round's posttrain sides, xla:cpu first.
func posttrainSides(rd Round) []string {
	var out []string
	for _, s := range []string{SideXLA, SideGo} {
		if rd.Sides[s] != nil {
			out = append(out, s)
		}
	}
	return out
}

// CheckLoads returns an error naming the first round in which the 1-minute load average before a
// posttrain side and the one before the PyTorch side differ by more than MaxLoadGap: their time
// ratio would compare two machines.
func CheckLoads(rounds []Round) error {
	for _, rd := range rounds {
		pt := rd.Sides[SidePyTorch]
		for _, s := range posttrainSides(rd) {
			if g := rd.Sides[s]; math.Abs(g.Load1-pt.Load1) > MaxLoadGap {
				return fmt.Errorf("round %d: load average %.2f before posttrain %s (%s), %.2f before PyTorch (%s): "+
					"they differ by more than %g, no table", rd.N, g.Load1, sideName(s), g.Start, pt.Load1, pt.Start, MaxLoadGap)
			}
		}
	}
	return nil
}

func sideName(s string) string {
	switch s {
	case SidePyTorch:
		return "PyTorch"
	case SideGo:
		return "pure-Go"
	}
	return s
}
