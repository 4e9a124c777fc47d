package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	forward = Workloads[0]
	decode  = Workloads[3]
)

// The per-round ratio is posttrain ÷ PyTorch for a time and PyTorch ÷ posttrain for a rate, so
// that below 1 is posttrain faster in both; a missing or zero figure gives no ratio.
func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		name             string
		w                Workload
		posttrain, torch map[string]float64
		want             float64
		ok               bool
	}{
		{"time, posttrain faster", forward, map[string]float64{"s": 0.5}, map[string]float64{"s": 2}, 0.25, true},
		{"time, posttrain slower", forward, map[string]float64{"s": 3}, map[string]float64{"s": 2}, 1.5, true},
		{"rate, posttrain faster", decode, map[string]float64{"tokens_per_s": 8}, map[string]float64{"tokens_per_s": 2}, 0.25, true},
		{"rate, posttrain slower", decode, map[string]float64{"tokens_per_s": 1}, map[string]float64{"tokens_per_s": 2}, 2, true},
		{"posttrain missing", forward, nil, map[string]float64{"s": 2}, 0, false},
		{"PyTorch missing", decode, map[string]float64{"tokens_per_s": 8}, map[string]float64{"s": 2}, 0, false},
		{"zero", forward, map[string]float64{"s": 0}, map[string]float64{"s": 2}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Ratio(tc.w, tc.posttrain, tc.torch)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("Ratio = %g, %v; want %g, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestNewStat(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want Stat
		ok   bool
	}{
		{[]float64{3, 1, 2}, Stat{Median: 2, Min: 1, Max: 3}, true},
		{[]float64{4, 1, 3, 2}, Stat{Median: 2.5, Min: 1, Max: 4}, true},
		{[]float64{0.7}, Stat{Median: 0.7, Min: 0.7, Max: 0.7}, true},
		{nil, Stat{}, false},
	} {
		got, ok := NewStat(tc.xs)
		if ok != tc.ok || got.Median != tc.want.Median || got.Min != tc.want.Min || got.Max != tc.want.Max {
			t.Errorf("NewStat(%v) = %+v, %v; want %+v, %v", tc.xs, got, ok, tc.want, tc.ok)
		}
		if ok && fmt.Sprint(got.Rounds) != fmt.Sprint(tc.xs) {
			t.Errorf("NewStat(%v).Rounds = %v: not the rounds in their order", tc.xs, got.Rounds)
		}
	}
}

// side is a side run with the given load before it and figures.
func side(round int, name string, load float64, figs Figures) SideRun {
	return SideRun{Round: round, Side: name, Start: fmt.Sprintf("2026-12-02T05:%02d:00Z", 10*round), Load1: load, Figures: figs}
}

// The reported ratio is the median of the rounds' ratios, not the ratio of the medians: here the
// medians of both sides' times are 2 s (ratio 1) while two rounds of three had posttrain at half
// PyTorch's time. For decode the per-round ratio is PyTorch's tokens/s ÷ posttrain's.
func TestCompare_MedianOfPerRoundRatios(t *testing.T) {
	post, torch := []float64{1, 2, 4}, []float64{2, 1, 8}
	postTok, torchTok := []float64{8, 8, 8}, []float64{2, 4, 2}
	var runs []SideRun
	for i := range 3 {
		g := Figures{"forward": {"s": post[i], "compile_s": float64(i + 1)}, "decode": {"tokens_per_s": postTok[i]}}
		p := Figures{"forward": {"s": torch[i]}, "decode": {"tokens_per_s": torchTok[i]}}
		runs = append(runs, side(i+1, SideXLA, 1, g), side(i+1, SidePyTorch, 1, p))
	}
	rounds, err := GroupRounds(runs)
	if err != nil {
		t.Fatal(err)
	}
	byWorkload := map[string]Comparison{}
	for _, c := range Compare(rounds) {
		byWorkload[c.Workload] = c
	}
	for _, tc := range []struct {
		workload                    string
		median, lo, hi, post, torch float64
	}{
		{"forward", 0.5, 0.5, 2, 2, 2},
		{"decode", 0.25, 0.25, 0.5, 8, 2},
	} {
		c := byWorkload[tc.workload]
		if c.Ratio == nil || c.Ratio.Median != tc.median || c.Ratio.Min != tc.lo || c.Ratio.Max != tc.hi {
			t.Errorf("%s: ratio %+v, want median %g (%g–%g)", tc.workload, c.Ratio, tc.median, tc.lo, tc.hi)
		}
		if c.Posttrain == nil || c.PyTorch == nil || c.Posttrain.Median != tc.post || c.PyTorch.Median != tc.torch {
			t.Errorf("%s: medians posttrain %+v, PyTorch %+v; want %g and %g", tc.workload, c.Posttrain, c.PyTorch, tc.post, tc.torch)
		}
	}
	if c := byWorkload["forward"].CompileS; c == nil || c.Median != 2 {
		t.Errorf("forward: compile time %+v, want median 2", c)
	}
	if c := byWorkload["adamw"]; c.Ratio != nil || c.Posttrain != nil {
		t.Errorf("adamw, measured by neither side: %+v, want no figures", c)
	}
}

// A round in which the load average before a posttrain side and the one before PyTorch differ by
// more than 1 refuses the table, naming the round, the side and both loads; a gap of 1 passes.
func TestCheckLoads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		runs  []SideRun
		ok    bool
		names []string // in the refusal
	}{
		{"equal loads", []SideRun{side(1, SideXLA, 2.5, nil), side(1, SidePyTorch, 2.5, nil)}, true, nil},
		{"gap of exactly 1", []SideRun{side(1, SideXLA, 2, nil), side(1, SidePyTorch, 3, nil)}, true, nil},
		{"round 2, PyTorch's load higher", []SideRun{side(1, SideXLA, 2, nil), side(1, SidePyTorch, 2.5, nil),
			side(2, SidePyTorch, 5.5, nil), side(2, SideXLA, 2.7, nil)}, false, []string{"round 2:", "2.70 before posttrain xla:cpu", "5.50 before PyTorch"}},
		{"posttrain's load higher", []SideRun{side(1, SidePyTorch, 0.5, nil), side(1, SideXLA, 1.6, nil)}, false, []string{"round 1:", "1.60", "0.50"}},
		{"the pure-Go side's gap", []SideRun{side(1, SideXLA, 2, nil), side(1, SidePyTorch, 2, nil), side(1, SideGo, 4, nil)},
			false, []string{"round 1:", "4.00 before posttrain pure-Go", "2.00 before PyTorch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rounds, err := GroupRounds(tc.runs)
			if err != nil {
				t.Fatal(err)
			}
			err = CheckLoads(rounds)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckLoads = %v, want ok %v", err, tc.ok)
			}
			for _, s := range tc.names {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("refusal %q does not name %q", err, s)
				}
			}
		})
	}
}

func TestGroupRounds_Refuses(t *testing.T) {
	failed := side(1, SidePyTorch, 1, nil)
	failed.Exit = 1
	for _, tc := range []struct {
		name string
		runs []SideRun
		want string
	}{
		{"a failed side", []SideRun{side(1, SideXLA, 1, nil), failed}, "round 1: PyTorch failed (exit 1"},
		{"no PyTorch", []SideRun{side(1, SideXLA, 1, nil), side(1, SidePyTorch, 1, nil), side(2, SideXLA, 1, nil)}, "round 2: no PyTorch side"},
		{"no posttrain", []SideRun{side(1, SidePyTorch, 1, nil)}, "round 1: posttrain sides []"},
		{"another backend", []SideRun{side(1, SideXLA, 1, nil), side(1, SidePyTorch, 1, nil), side(2, SideGo, 1, nil), side(2, SidePyTorch, 1, nil)},
			"round 2: posttrain sides [go]"},
		{"a side twice", []SideRun{side(1, SideXLA, 1, nil), side(1, SideXLA, 1, nil)}, "round 1: xla:cpu twice"},
		{"nothing", nil, "no rounds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := GroupRounds(tc.runs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("GroupRounds = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// BenchmarkCPU's output (xla:cpu, 2 CPUs) as `go test -bench` prints it.
const goBenchOutput = `goos: linux
BenchmarkCPU/forward-2         	       1	2592952146 ns/op	         0.7161 compile-s	         1.000 graphs	         0.1792 s/op-median	         0 timed-compiles
BenchmarkCPU/grpo-2            	       1	11248878004 ns/op	         5.758 compile-s	         0.9527 generate-s	         4.000 graphs	         2.270 s/step	         0 timed-compiles	         1.317 update-s
--- BENCH: BenchmarkCPU/grpo-2
    cpu_bench_test.go:209: bench: grpo 2×4×16: step 2.27s (generate 0.95s, update 1.32s in 1 micro-batches)
BenchmarkCPU/decode_bf16       	       1	25749792799 ns/op	         8.270 compile-s	         2.000 graphs	         0.5217 prefill-s	         0 timed-compiles	         8.863 tokens/s
PASS
`

func TestParseGoBench(t *testing.T) {
	got, lines := ParseGoBench(goBenchOutput)
	want := Figures{
		"forward":     {"s": 0.1792, "compile_s": 0.7161, "graphs": 1, "timed_compiles": 0},
		"grpo":        {"s": 2.270, "generate_s": 0.9527, "update_s": 1.317, "compile_s": 5.758, "graphs": 4, "timed_compiles": 0},
		"decode_bf16": {"tokens_per_s": 8.863, "prefill_s": 0.5217, "compile_s": 8.270, "graphs": 2, "timed_compiles": 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseGoBench = %v\nwant %v", got, want)
	}
	if len(lines) != 3 {
		t.Errorf("%d result lines, want 3: %q", len(lines), lines)
	}
}

// writeRun writes a sides file for run(): two rounds of xla:cpu and PyTorch with the given loads
// (xla:cpu, PyTorch per round), outputs in the formats of BenchmarkCPU and cpu_bench.py.
func writeRun(t *testing.T, loads [][2]float64) (sides, out string) {
	t.Helper()
	dir := t.TempDir()
	var lines []string
	for i, ld := range loads {
		n := i + 1
		goOut := filepath.Join(dir, fmt.Sprintf("r%d-xla.txt", n))
		ptOut := filepath.Join(dir, fmt.Sprintf("r%d-torchh.json", n))
		must(t, os.WriteFile(goOut, []byte(goBenchOutput), 0o644))
		must(t, os.WriteFile(ptOut, []byte(`{"torch": "2.15.0", "threads": 2, "workloads": {"forward": {"s": 0.4},
			"grpo": {"s": 4.54, "generate_s": 2, "update_s": 2.54}, "decode": {"tokens_per_s": 2}, "decode_bf16": {"tokens_per_s": 1.5, "prefill_s": 1.2, "attn": "sdpa"}}}`), 0o644))
		for _, s := range []SideRun{{Round: n, Side: SideXLA, Start: "2026-12-02T05:00:00Z", Load1: ld[0], Seconds: 90, Output: goOut},
			{Round: n, Side: SidePyTorch, Start: "2026-12-02T05:01:30Z", Load1: ld[1], Seconds: 120, Output: ptOut}} {
			b, err := json.Marshal(s)
			must(t, err)
			lines = append(lines, string(b))
		}
	}
	sides = filepath.Join(dir, "sides.jsonl")
	must(t, os.WriteFile(sides, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	return sides, filepath.Join(dir, "bench-results.json")
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// run prints the table from the rounds' output files (a figure one side lacks is "missing", a
// workload neither side ran has no row); with a load gap it prints nothing, returns
// the refusal, and writes the JSON file with every side's figures all the same.
func TestRun(t *testing.T) {
	sides, out := writeRun(t, [][2]float64{{2, 2.4}, {2.1, 2.0}})
	var table bytes.Buffer
	if err := run(&table, sides, out, "abc1234", "2 rounds"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"QUICK LOOK", "commit abc1234", "PyTorch 2.15.0 (2 threads)",
		"| 0.179 s | 0.400 s | 0.45× (0.45–0.45) | 0.7 s |", "| 8.86 tokens/s | 1.50 tokens/s | 0.17× (0.17–0.17) | 8.3 s |",
		"| GRPO step: update | 1.317 s | 2.540 s |",
		"| decode, batch 1, Qwen2.5-0.5B shape (494M parameters), float32, KV cache | missing | 2.00 tokens/s | n/a | n/a |", "| 2 | 05:00:00, 2.10 → 0.00, 90 s | 05:01:30, 2.00 → 0.00, 120 s |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, table.String())
		}
	}
	if strings.Contains(table.String(), "AdamW") {
		t.Errorf("the table has a row for adamw, which neither side ran:\n%s", table.String())
	}

	sides, out = writeRun(t, [][2]float64{{2, 2.4}, {2.1, 3.2}})
	table.Reset()
	err := run(&table, sides, out, "abc1234", "")
	if err == nil || !strings.Contains(err.Error(), "round 2: load average 2.10 before posttrain xla:cpu") || table.Len() > 0 {
		t.Fatalf("run = %v with output %q; want the refusal of round 2 and no table", err, table.String())
	}
	var res Results
	data, rerr := os.ReadFile(out)
	must(t, rerr)
	must(t, json.Unmarshal(data, &res))
	if len(res.Sides) != 4 || res.Sides[3].Figures["decode_bf16"]["tokens_per_s"] != 1.5 || res.Refused == "" || res.Comparisons != nil {
		t.Errorf("the refused run's JSON: %d sides, refused %q, %d comparisons; want 4 sides with figures, the refusal, none",
			len(res.Sides), res.Refused, len(res.Comparisons))
	}
}
