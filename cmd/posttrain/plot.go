package main

import (
	"context"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/posttrain/posttrain/internal/runlog"
)

func init() {
	addCommand(&cli.Command{
		Name:      "plot",
		Usage:     "draw the training curves of a run (RUN_DIR/metrics.jsonl), one panel per metric against step",
		ArgsUsage: "RUN_DIR",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "image file: .png, .svg or .pdf (default: RUN_DIR/curves.png)"},
			&cli.StringSliceFlag{Name: "metrics", Usage: "metrics to draw, comma-separated (default: all in the file)"},
			&cli.IntFlag{Name: "cols", Value: 3, Usage: "panels per row"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			if cmd.Args().Len() != 1 {
				return usageError{fmt.Errorf("plot: want one RUN_DIR (or metrics.jsonl), got %d arguments", cmd.Args().Len())}
			}
			run := cmd.Args().First()
			out := cmd.String("output")
			if out == "" {
				out = filepath.Join(run, "curves.png")
				if fi, err := os.Stat(run); err == nil && !fi.IsDir() {
					out = filepath.Join(filepath.Dir(run), "curves.png")
				}
			}
			if err := plotRun(run, out, cmd.StringSlice("metrics"), int(cmd.Int("cols"))); err != nil {
				return fmt.Errorf("plot: %w", err)
			}
			fmt.Fprintf(cmd.Root().Writer, "wrote %s\n", out)
			return nil
		},
	})
}

// plotRun reads the metrics of run (a directory or a metrics.jsonl file) and draws the chosen
// metrics (all if none) into out, one panel per metric, cols panels per row.
func plotRun(run, out string, metrics []string, cols int) error {
	records, err := runlog.ReadMetrics(run)
	if err != nil {
		return err
	}
	if len(records) == 0 {
		return fmt.Errorf("%s: no metrics lines", metricsPath(run))
	}
	available := metricNames(records)
	if len(metrics) == 0 {
		metrics = available
	}
	for i, m := range metrics {
		metrics[i] = strings.TrimSpace(m)
		if !slices.Contains(available, metrics[i]) {
			return fmt.Errorf("metric %q is not in %s; available: %s", metrics[i], metricsPath(run), strings.Join(available, ", "))
		}
	}
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), ".")
	switch format {
	case "png", "svg", "pdf":
	default:
		return fmt.Errorf("output %s: want a .png, .svg or .pdf file name", out)
	}
	cols = max(1, min(cols, len(metrics)))
	rows := (len(metrics) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, m := range metrics {
		p, err := metricPanel(records, m)
		if err != nil {
			return err
		}
		grid[i/cols][i%cols] = p
	}
	return drawGrid(grid, out, format)
}

func metricsPath(run string) string {
	if fi, err := os.Stat(run); err == nil && fi.IsDir() {
		return filepath.Join(run, runlog.MetricsName)
	}
	return run
}

// metricNames lists the metrics of the records in metrics.jsonl order, loss first.
func metricNames(records []runlog.Record) []string {
	seen := map[string]float64{}
	for _, r := range records {
		for k, v := range r.Metrics {
			seen[k] = v
		}
	}
	return runlog.Record{Metrics: seen}.Keys()
}

// metricPanel is one metric against step; non-finite values are left out.
func metricPanel(records []runlog.Record, metric string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = metric
	p.X.Label.Text = "step"
	p.Add(plotter.NewGrid())
	var pts plotter.XYs
	for _, r := range records {
		if v, ok := r.Metrics[metric]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			pts = append(pts, plotter.XY{X: float64(r.Step), Y: v})
		}
	}
	if len(pts) == 0 {
		p.Title.Text += " (no finite values)"
		return p, nil
	}
	line, err := plotter.NewLine(pts)
	if err != nil {
		return nil, fmt.Errorf("metric %s: %w", metric, err)
	}
	line.Color = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	line.Width = vg.Points(1.5)
	p.Add(line)
	if len(pts) <= 60 {
		marks, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("metric %s: %w", metric, err)
		}
		marks.Color, marks.Radius = line.Color, vg.Points(2)
		p.Add(marks)
	}
	return p, nil
}

// drawGrid draws the panels on one canvas (4×3 inches each) and writes it to out.
func drawGrid(grid [][]*plot.Plot, out, format string) error {
	rows, cols := len(grid), len(grid[0])
	w, h := vg.Length(cols)*4*vg.Inch, vg.Length(rows)*3*vg.Inch
	canvas, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White) // PNG pixels between the panels would be transparent otherwise
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(grid, tiles, dc)
	for i := range grid {
		for j, p := range grid[i] {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
