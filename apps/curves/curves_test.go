package curves

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"

	"github.com/posttrain/posttrain/internal/runlog"
)

// readTick is the value a tick label reads as (120k, 1.6e-6, 0.50).
func readTick(t *testing.T, label string) float64 {
	t.Helper()
	unit := 1.0
	for suffix, u := range map[string]float64{"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12} {
		if s, ok := strings.CutSuffix(label, suffix); ok {
			label, unit = s, u
		}
	}
	v, err := strconv.ParseFloat(label, 64)
	if err != nil {
		t.Fatalf("label %q is not a number", label)
	}
	return v * unit
}

func TestTickLabels(t *testing.T) {
	cases := []struct {
		values []float64
		want   string
	}{
		{[]float64{0, 1e-4, 2e-4, 3e-4}, "0 1e-4 2e-4 3e-4"},
		{[]float64{8e-7, 1.2e-6, 1.6e-6}, "8.0e-7 1.2e-6 1.6e-6"},
		{[]float64{40000, 80000, 120000}, "40k 80k 120k"},
		{[]float64{1.5e6, 2e6, 2.5e6}, "1.5M 2.0M 2.5M"},
		{[]float64{0, 0.25, 0.5}, "0 0.25 0.50"},
		{[]float64{0.496, 0.498, 0.5, 0.502}, "0.496 0.498 0.500 0.502"},
		{[]float64{-0.01, 1e-18, 0.01}, "-0.01 0 0.01"}, // 1e-18: a zero computed in floating point
		{[]float64{0, 20, 40, 60}, "0 20 40 60"},
		{[]float64{0.1, 0.3, 0.5, 0.7, 0.9}, "0.1 0.3 0.5 0.7 0.9"},
	}
	for _, c := range cases {
		if got := strings.Join(tickLabels(c.values), " "); got != c.want {
			t.Errorf("tickLabels(%v) = %q, want %q", c.values, got, c.want)
		}
	}
	// Axis ranges at every scale: the labelled ticks read as distinct values, each within a
	// thousandth of the spacing of the value it marks.
	for _, r := range [][2]float64{{2.7e-4, 3.1e-4}, {0, 3e-4}, {0.7e-6, 1.6e-6}, {0.3, 0.30001}, {-0.8, 0.8},
		{3, 3.7}, {0, 119846}, {1e9, 1.2e9}, {-5e-9, 5e-9}, {1000, 1000.5}, {0.02, 0.95}} {
		var labels []string
		var vals []float64
		for _, tk := range (readableTicks{}).Ticks(r[0], r[1]) {
			if tk.Label != "" {
				labels, vals = append(labels, tk.Label), append(vals, tk.Value)
			}
		}
		if len(labels) < 2 {
			t.Errorf("range %v: labels %q: want two or more", r, labels)
			continue
		}
		spacing := vals[1] - vals[0]
		for i, l := range labels {
			if got := readTick(t, l); math.Abs(got-vals[i]) > spacing/1000 {
				t.Errorf("range %v: label %q reads %g, tick at %g", r, l, got, vals[i])
			}
			if i > 0 && l == labels[i-1] {
				t.Errorf("range %v: labels %q repeat", r, labels)
			}
			if len(l) > 8 {
				t.Errorf("range %v: label %q is long", r, l)
			}
		}
	}
	// The step axis labels integers only.
	for _, tk := range (readableTicks{integers: true}).Ticks(0, 5) {
		if tk.Label != "" && tk.Value != math.Round(tk.Value) {
			t.Errorf("step axis labels %g as %q", tk.Value, tk.Label)
		}
	}
}

// writeRecords writes records as dir/metrics.jsonl, and, if method is not "", a training_args.yaml
// naming it.
func writeRecords(t *testing.T, dir, method string, records []runlog.Record) {
	t.Helper()
	m, err := runlog.OpenMetrics(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range records {
		if _, err := m.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if method != "" {
		yaml := "# posttrain " + method + ": resolved configuration; reuse with --config\nlearning_rate: 0.0003\n"
		if err := os.WriteFile(filepath.Join(dir, "training_args.yaml"), []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// grpoRecords is a GRPO-like run: reward rises with seed-dependent noise; clip_ratio and
// learning_rate are constant.
func grpoRecords(seed float64, withKL bool) []runlog.Record {
	var rs []runlog.Record
	for step := 5; step <= 60; step += 5 {
		x := float64(step)
		m := map[string]float64{
			"loss": 0.1 * math.Sin(x+seed), "grad_norm": 1 + math.Cos(x*seed), "learning_rate": 3e-4,
			"reward": 1 - math.Exp(-x/20) + 0.01*seed, "reward_std": 0.5 - x/200, "rewards/mult_strict/mean": 1 - math.Exp(-x/20),
			"clip_ratio/low_mean": 0, "clip_ratio/high_max": 0, "completions/mean_length": 3.6 - x/100,
			"entropy": 0.3 - x/1000, "num_tokens": 2000 * x, "timing_s/update": 2 + 0.1*math.Sin(x),
		}
		if withKL {
			m["kl"] = x / 300
		}
		rs = append(rs, runlog.Record{Step: step, Epoch: x / 60, Metrics: m})
	}
	return rs
}

func panelMetrics(f *figure) []string {
	var names []string
	for _, p := range f.panels {
		names = append(names, p.metric)
		if p.plot.Title.Text != p.metric {
			t := p.plot.Title.Text
			names[len(names)-1] += "[title " + t + "]"
		}
	}
	return names
}

func TestPlot_PanelOrderAndConstants(t *testing.T) {
	// GRPO, guessed from the metric names (no training_args.yaml).
	dir := t.TempDir()
	writeRecords(t, dir, "", grpoRecords(1, true))
	runs := []plotRun{{label: "a", path: dir, records: grpoRecords(1, true)}}
	if m := runMethod(runs[0]); m != "grpo" {
		t.Fatalf("method %q, want grpo", m)
	}
	f, err := buildFigure(runs, "grpo", Options{Cols: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := "reward rewards/mult_strict/mean reward_std kl loss completions/mean_length entropy grad_norm num_tokens timing_s/update"
	if got := strings.Join(panelMetrics(f), " "); got != want {
		t.Errorf("GRPO panels:\n got %s\nwant %s", got, want)
	}
	if got, want := strings.Join(f.constants, ", "), "learning_rate = 0.0003, clip_ratio/high_max = 0, clip_ratio/low_mean = 0"; got != want {
		t.Errorf("constants %q, want %q", got, want)
	}
	if lines := f.constantLines(3 * panelW); len(lines) != 1 || !strings.HasPrefix(lines[0], "constant: learning_rate = 0.0003, clip_ratio/high_max = 0,") {
		t.Errorf("constant line %q", lines)
	}

	// SFT, named by training_args.yaml although the names alone would not say; eval_loss on the
	// loss panel, eval_runtime a panel of its own.
	sft := t.TempDir()
	var recs []runlog.Record
	for step := 1; step <= 6; step++ {
		recs = append(recs, runlog.Record{Step: step, Metrics: map[string]float64{"loss": 2 / float64(step),
			"grad_norm": float64(step), "learning_rate": 1e-5 * float64(step), "mean_token_accuracy": 0.1 * float64(step), "aaa": float64(step)}})
		if step%3 == 0 {
			recs = append(recs, runlog.Record{Step: step, Metrics: map[string]float64{"eval_loss": 2.5 / float64(step), "eval_runtime": float64(step)}})
		}
		if step == 4 { // logged once: a panel, not a constant
			recs[len(recs)-1].Metrics["once"] = 7
		}
	}
	writeRecords(t, sft, "sft", recs)
	runs = []plotRun{{label: "s", path: sft, records: recs}}
	if m := runMethod(runs[0]); m != "sft" {
		t.Fatalf("method %q, want sft", m)
	}
	f, err = buildFigure(runs, "sft", Options{Cols: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(panelMetrics(f), " "), "loss mean_token_accuracy learning_rate grad_norm aaa once eval_runtime"; got != want {
		t.Errorf("SFT panels:\n got %s\nwant %s", got, want)
	}
	if f.panels[0].eval != "eval_loss" || f.panels[1].eval != "" || len(f.constants) != 0 {
		t.Errorf("eval series: loss panel has %q, next %q; constants %q", f.panels[0].eval, f.panels[1].eval, f.constants)
	}

	// --metrics keeps the order given and draws a constant.
	f, err = buildFigure([]plotRun{{label: "a", path: dir, records: grpoRecords(1, true)}}, "grpo",
		Options{Metrics: []string{"learning_rate", "loss"}, Cols: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(panelMetrics(f), " "); got != "learning_rate loss" || len(f.constants) != 0 {
		t.Errorf("--metrics: panels %q, constants %q", got, f.constants)
	}
	if p := f.panels[0].plot; !(p.Y.Min < 3e-4 && p.Y.Max > 3e-4 && p.Y.Min > 0) {
		t.Errorf("constant learning_rate drawn on [%g, %g]", p.Y.Min, p.Y.Max)
	}
}

func TestSmoothEMA(t *testing.T) {
	// TensorBoard: last = last·w + (1−w)·y from 0, shown as last/(1−w^n).
	got := smoothEMA(plotter.XYs{{X: 1, Y: 1}, {X: 2, Y: 2}, {X: 3, Y: 3}}, 0.5)
	for i, want := range []float64{1, 1.25 / 0.75, 2.125 / 0.875} {
		if math.Abs(got[i].Y-want) > 1e-12 || got[i].X != float64(i+1) {
			t.Errorf("point %d: %v, want y %g", i, got[i], want)
		}
	}
	if got := smoothEMA(plotter.XYs{{X: 1, Y: 7}, {X: 2, Y: 7}}, 0.9); got[0].Y != 7 || got[1].Y != 7 {
		t.Errorf("constant series smoothed to %v", got)
	}
}

func TestPlot_SeveralRuns(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "grpo"), filepath.Join(root, "grpo-random")
	os.Mkdir(a, 0o755)
	os.Mkdir(b, 0o755)
	writeRecords(t, a, "grpo", grpoRecords(1, true))
	writeRecords(t, b, "grpo", grpoRecords(2, false)) // no kl: drawn for the first run only

	out := filepath.Join(root, "both.png")
	if keep := os.Getenv("POSTTRAIN_PLOT_OUT"); keep != "" {
		out = keep
	}
	if err := Draw([]string{a, b}, out, Options{Smooth: 0.6, Cols: 3}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	// 10 panels in 4 rows of 3, a legend strip above and the constants' line below.
	if b := img.Bounds(); b.Dx() != 3*384 || b.Dy() <= 4*288 || b.Dy() > 4*288+120 {
		t.Errorf("size %v, want 1152 × a bit more than 1152", b)
	}

	runs := []plotRun{{label: "grpo", path: a, records: grpoRecords(1, true)}, {label: "grpo-random", path: b, records: grpoRecords(2, false)}}
	fig, err := buildFigure(runs, "grpo", Options{Cols: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := panelMetrics(fig); len(got) != 10 || got[3] != "kl" {
		t.Errorf("panels %q: want 10 with kl fourth", got)
	}

	// Legend names: base names, paths where two are the same, or --labels.
	other := filepath.Join(root, "x", "grpo")
	os.MkdirAll(other, 0o755)
	writeRecords(t, other, "", grpoRecords(3, true))
	for _, c := range []struct {
		paths, labels []string
		want          string
	}{
		{[]string{a, b}, nil, "grpo grpo-random"},
		{[]string{a, other, filepath.Join(b, runlog.MetricsName)}, nil, a + " " + other + " grpo-random"},
		{[]string{a, b}, []string{"verifier", " control"}, "verifier control"},
	} {
		runs, err := loadRuns(c.paths, c.labels)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.label)
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("labels of %v %v: %q, want %q", c.paths, c.labels, got, c.want)
		}
	}

	cases := []struct {
		paths []string
		opts  Options
		want  string
	}{
		{[]string{a, b}, Options{Labels: []string{"x"}, Cols: 3}, "--labels: 1 names for 2 runs"},
		{[]string{a}, Options{Smooth: 1, Cols: 3}, "--smooth 1: want an EMA weight in [0, 1)"},
		{[]string{a, b}, Options{Metrics: []string{"nope"}, Cols: 3}, `metric "nope" is not in any of the runs; available: loss,`},
	}
	for _, c := range cases {
		if err := Draw(c.paths, out, c.opts); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%v %+v: got %v, want prefix %q", c.paths, c.opts, err, c.want)
		}
	}
}
