package main

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/internal/runlog"
)

// writeRunMetrics writes a small GRPO-like metrics.jsonl: loss falls, reward rises, one NaN.
func writeRunMetrics(t *testing.T, dir string) {
	t.Helper()
	m, err := runlog.OpenMetrics(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for step := 1; step <= 40; step++ {
		loss := math.Exp(-float64(step)/10) + 0.05*math.Sin(float64(step))
		if step == 17 {
			loss = math.NaN()
		}
		_, err := m.Write(runlog.Record{Step: step, Epoch: float64(step) / 40, Metrics: map[string]float64{
			"loss": loss, "reward": 1 - math.Exp(-float64(step)/15), "learning_rate": 1e-6 * float64(40-step) / 40,
			"grad_norm": 1 + 0.1*math.Cos(float64(step)),
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func runPlot(t *testing.T, args ...string) (string, error) {
	t.Helper()
	app := newApp()
	var out, errOut bytes.Buffer
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(context.Background(), append([]string{"posttrain", "plot"}, args...))
	return out.String(), err
}

func TestPlot_WritesPNG(t *testing.T) {
	dir := t.TempDir()
	writeRunMetrics(t, dir)
	out := filepath.Join(dir, "curves.png")
	if keep := os.Getenv("POSTTRAIN_PLOT_OUT"); keep != "" { // to look at it: POSTTRAIN_PLOT_OUT=/tmp/c.png
		out = keep
	}
	stdout, err := runPlot(t, dir, "-o", out, "--metrics", "loss,reward")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "wrote "+out) {
		t.Errorf("stdout %q", stdout)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	b := img.Bounds()
	if b.Dx() != 2*384 || b.Dy() != 288 { // two 4×3-inch panels at 96 dpi
		t.Errorf("size %v, want 768×288", b)
	}
	// The curves are drawn in blue (31,119,180): count such pixels.
	blue := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if r>>8 < 80 && g>>8 > 90 && g>>8 < 150 && bl>>8 > 150 {
				blue++
			}
		}
	}
	if blue < 500 {
		t.Errorf("only %d curve pixels: nothing drawn?", blue)
	}
}

func TestPlot_DefaultsAndFormats(t *testing.T) {
	dir := t.TempDir()
	writeRunMetrics(t, dir)
	if _, err := runPlot(t, dir); err != nil { // all metrics, RUN_DIR/curves.png
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "curves.png")); err != nil || fi.Size() == 0 {
		t.Fatalf("default output: %v", err)
	}
	svg := filepath.Join(dir, "c.svg")
	if _, err := runPlot(t, filepath.Join(dir, runlog.MetricsName), "-o", svg); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(svg); !bytes.Contains(b, []byte("<svg")) {
		t.Error("not an SVG")
	}
}

func TestPlot_Errors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, runlog.MetricsName)
	cases := []struct {
		file string // metrics.jsonl contents; "" = no file
		args []string
		want string
	}{
		{"", nil, "plot: read metrics: open " + path},
		{"{\"step\":1,\"loss\":1}\n{\"step\":2,\"loss\":\"x\"}\n", nil, fmt.Sprintf(`plot: %s:2: "loss": want a number, got "x"`, path)},
		{"\n", nil, "plot: " + path + ": no metrics lines"},
		{"{\"step\":1,\"loss\":1}\n", []string{"--metrics", "reward"}, `plot: metric "reward" is not in ` + path + "; available: loss"},
		{"{\"step\":1,\"loss\":1}\n", []string{"-o", filepath.Join(dir, "c.gif")}, "plot: output " + filepath.Join(dir, "c.gif") + ": want a .png, .svg or .pdf"},
	}
	for _, c := range cases {
		os.Remove(path)
		if c.file != "" {
			os.WriteFile(path, []byte(c.file), 0o644)
		}
		_, err := runPlot(t, append([]string{dir}, c.args...)...)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("file %q args %v: got %v, want prefix %q", c.file, c.args, err, c.want)
		}
	}
	if _, err := runPlot(t); err == nil || !strings.Contains(err.Error(), "want one RUN_DIR") {
		t.Errorf("no argument: %v", err)
	}
	if _, err := runPlot(t, dir, dir); err == nil || !strings.HasPrefix(err.Error(), "plot: 2 runs: name the output file with -o") {
		t.Errorf("two runs without -o: %v", err)
	}
}
