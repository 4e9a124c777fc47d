// Package curves draws the training curves of runs (RUN_DIR/metrics.jsonl) as `posttrain plot`
// does: one panel per metric against step, in the order the method's users read them, several runs
// overlaid, constant metrics listed as text, eval_X dashed on X's panel, TensorBoard's EMA
// smoothing (gonum.org/v1/plot).
package curves

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/posttrain/posttrain/internal/runlog"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Options say what Draw draws (the plot command's flags).
type Options struct {
	Metrics []string // panels to draw, in order (all, ordered by method, if empty)
	Labels  []string // legend names of the runs (base names if empty)
	Smooth  float64  // EMA weight in [0, 1); 0 draws the raw series only
	Cols    int      // panels per row
}

// plotRun is one run: its legend name and its metrics lines.
type plotRun struct {
	label   string
	path    string // the argument as given (a directory or a metrics.jsonl file)
	records []runlog.Record
}

// RunDir is the directory of a run argument: itself, or the directory of a metrics.jsonl file.
func RunDir(run string) string {
	if fi, err := os.Stat(run); err == nil && !fi.IsDir() {
		return filepath.Dir(run)
	}
	return run
}

// Draw reads the metrics of the runs (directories or metrics.jsonl files) and draws them into
// out (.png, .svg or .pdf), one panel per metric, the runs overlaid.
func Draw(paths []string, out string, opts Options) error {
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(out)), ".")
	switch format {
	case "png", "svg", "pdf":
	default:
		return fmt.Errorf("output %s: want a .png, .svg or .pdf file name", out)
	}
	if !(opts.Smooth >= 0 && opts.Smooth < 1) {
		return fmt.Errorf("--smooth %v: want an EMA weight in [0, 1)", opts.Smooth)
	}
	runs, err := loadRuns(paths, opts.Labels)
	if err != nil {
		return err
	}
	method := runMethod(runs[0])
	fig, err := buildFigure(runs, method, opts)
	if err != nil {
		return err
	}
	return fig.draw(out, format)
}

// loadRuns reads the runs' metrics and names them: labels, or the directories' base names (their
// paths where two base names are the same).
func loadRuns(paths, labels []string) ([]plotRun, error) {
	if len(labels) > 0 && len(labels) != len(paths) {
		return nil, fmt.Errorf("--labels: %d names for %d runs", len(labels), len(paths))
	}
	runs := make([]plotRun, len(paths))
	for i, p := range paths {
		records, err := runlog.ReadMetrics(p)
		if err != nil {
			return nil, err
		}
		if len(records) == 0 {
			return nil, fmt.Errorf("%s: no metrics lines", metricsPath(p))
		}
		runs[i] = plotRun{label: filepath.Base(filepath.Clean(RunDir(p))), path: p, records: records}
		if len(labels) > 0 {
			runs[i].label = strings.TrimSpace(labels[i])
		}
	}
	if len(labels) == 0 { // two runs named grpo in different places: name them by their paths
		count := map[string]int{}
		for _, r := range runs {
			count[r.label]++
		}
		for i := range runs {
			if count[runs[i].label] > 1 {
				runs[i].label = filepath.Clean(RunDir(runs[i].path))
			}
		}
	}
	return runs, nil
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

// runMethod is the method that trained run: the one named in the header comment of its
// training_args.yaml, else a guess from its metric names ("" when none fits).
func runMethod(run plotRun) string {
	if b, err := os.ReadFile(filepath.Join(RunDir(run.path), config.ResolvedName)); err == nil {
		if m := config.SavedMethod(b); m != "" {
			return m
		}
	}
	names := metricNames(run.records)
	has := func(k string) bool { return slices.Contains(names, k) }
	switch {
	case has("reward") || has("frac_reward_zero_std") || has("completions/mean_length"):
		return "grpo"
	case has("rewards/accuracies"):
		return "dpo"
	case has("kl") && has("rewards/chosen"):
		return "kto"
	case has("rewards/margins"):
		return "dpo"
	case has("mean_token_accuracy"):
		return "sft"
	case has("accuracy") && has("margin") && has("mean_reward"):
		return "reward"
	}
	return ""
}

// panelOrder lists, per method, the metrics its users look at first, in that order ("p/*" is
// every metric under p/, by name); the others follow by name. eval_X ranks as X.
var panelOrder = map[string][]string{
	"grpo": {"reward", "rewards/*", "reward_std", "kl", "loss", "completions/mean_length", "entropy",
		"frac_reward_zero_std", "completions/clipped_ratio", "grad_norm", "learning_rate"},
	"sft": {"loss", "mean_token_accuracy", "learning_rate", "grad_norm", "entropy", "num_tokens"},
	"dpo": {"loss", "rewards/margins", "rewards/accuracies", "rewards/chosen", "rewards/rejected",
		"logps/chosen", "logps/rejected", "logits/chosen", "logits/rejected", "grad_norm", "learning_rate"},
	"kto": {"loss", "rewards/margins", "rewards/chosen", "rewards/rejected", "kl",
		"logps/chosen", "logps/rejected", "logits/chosen", "logits/rejected", "grad_norm", "learning_rate"},
	"reward": {"loss", "accuracy", "margin", "mean_reward", "min_reward", "max_reward", "grad_norm", "learning_rate"},
}

// panelRank is metric's place in method's panelOrder (len of the list when it is not there).
func panelRank(method, metric string) int {
	metric = strings.TrimPrefix(metric, "eval_")
	order := panelOrder[method]
	for i, p := range order {
		if prefix, ok := strings.CutSuffix(p, "*"); ok && strings.HasPrefix(metric, prefix) || p == metric {
			return i
		}
	}
	return len(order)
}

// orderMetrics sorts names by method's panelOrder, then by name.
func orderMetrics(method string, names []string) []string {
	out := slices.Clone(names)
	slices.SortStableFunc(out, func(a, b string) int {
		if c := cmp.Compare(panelRank(method, a), panelRank(method, b)); c != 0 {
			return c
		}
		return strings.Compare(strings.TrimPrefix(a, "eval_"), strings.TrimPrefix(b, "eval_"))
	})
	return out
}

// series is the finite points of one metric of one run, by step.
func series(records []runlog.Record, metric string) plotter.XYs {
	var pts plotter.XYs
	for _, r := range records {
		if v, ok := r.Metrics[metric]; ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			pts = append(pts, plotter.XY{X: float64(r.Step), Y: v})
		}
	}
	return pts
}

// figure is what plot draws: the panels in order, the legend of the runs, and the line of
// constant metrics.
type figure struct {
	runs      []plotRun
	panels    []panel
	constants []string // "name = value", for the metrics that never change
	smooth    float64
	cols      int
}

// panel is one metric against step, with its eval_ series (eval is "" when there is none).
type panel struct {
	metric, eval string
	plot         *plot.Plot
}

// buildFigure plans the panels (ordered for method, constant metrics collapsed into text, eval_X
// on X's panel) and builds them.
func buildFigure(runs []plotRun, method string, opts Options) (*figure, error) {
	var available []string
	for _, r := range runs {
		for _, m := range metricNames(r.records) {
			if !slices.Contains(available, m) {
				available = append(available, m)
			}
		}
	}
	where := metricsPath(runs[0].path)
	if len(runs) > 1 {
		where = "any of the runs"
	}
	if len(available) == 0 {
		return nil, fmt.Errorf("no metrics in %s, only steps", where)
	}
	fig := &figure{runs: runs, smooth: opts.Smooth}
	var names []string
	if len(opts.Metrics) > 0 {
		for _, m := range opts.Metrics {
			m = strings.TrimSpace(m)
			if !slices.Contains(available, m) {
				return nil, fmt.Errorf("metric %q is not in %s; available: %s", m, where, strings.Join(available, ", "))
			}
			names = append(names, m)
		}
	} else {
		for _, m := range orderMetrics(method, available) {
			base, isEval := strings.CutPrefix(m, "eval_")
			if isEval && slices.Contains(available, base) {
				continue // with base: on its panel, or in its constant
			}
			if v, ok := constantValue(runs, m); ok {
				name := m
				if !isEval && slices.Contains(available, "eval_"+m) {
					name += " (and eval_" + m + ")"
				}
				fig.constants = append(fig.constants, name+" = "+strconv.FormatFloat(v, 'g', -1, 32))
				continue
			}
			names = append(names, m)
		}
	}
	for _, m := range names {
		eval := ""
		if e := "eval_" + m; !strings.HasPrefix(m, "eval_") && slices.Contains(available, e) {
			eval = e
		}
		if base, ok := strings.CutPrefix(m, "eval_"); ok && slices.Contains(names, base) {
			continue // drawn on base's panel
		}
		p, err := fig.metricPanel(m, eval)
		if err != nil {
			return nil, err
		}
		fig.panels = append(fig.panels, panel{metric: m, eval: eval, plot: p})
	}
	fig.cols = max(1, min(opts.Cols, len(fig.panels)))
	return fig, nil
}

// constantValue reports whether metric has one finite value, logged twice or more, in every run
// that logs it (with its eval_ series, when metric is not itself an eval one), and that value. A
// metric logged once keeps its panel.
func constantValue(runs []plotRun, metric string) (float64, bool) {
	first, seen, n := 0.0, false, 0
	for _, r := range runs {
		for _, rec := range r.records {
			for _, k := range []string{metric, "eval_" + metric} {
				if k != metric && strings.HasPrefix(metric, "eval_") {
					continue
				}
				v, ok := rec.Metrics[k]
				if !ok {
					continue
				}
				if math.IsNaN(v) || math.IsInf(v, 0) || seen && v != first {
					return 0, false
				}
				first, seen = v, true
				n++
			}
		}
	}
	return first, n > 1
}

// runColors are the runs' colours (matplotlib's tab10).
var runColors = []color.RGBA{
	{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {214, 39, 40, 255}, {148, 103, 189, 255},
	{140, 86, 75, 255}, {227, 119, 194, 255}, {127, 127, 127, 255}, {188, 189, 34, 255}, {23, 190, 207, 255},
}

func runColor(i int) color.RGBA { return runColors[i%len(runColors)] }

// faded is c at a third of its opacity (premultiplied, as color.RGBA is).
func faded(c color.RGBA) color.RGBA {
	return color.RGBA{R: c.R / 3, G: c.G / 3, B: c.B / 3, A: c.A / 3}
}

var evalDashes = []vg.Length{vg.Points(5), vg.Points(3)}

// metricPanel is metric (and its eval series) against step, one colour per run; non-finite values
// are left out.
func (f *figure) metricPanel(metric, eval string) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = metric
	p.X.Label.Text = "step"
	p.X.Tick.Marker = readableTicks{integers: true}
	p.Y.Tick.Marker = readableTicks{}
	p.Add(plotter.NewGrid())
	ymin, ymax, drawn := math.Inf(1), math.Inf(-1), false
	for i, r := range f.runs {
		c := runColor(i)
		pts := series(r.records, metric)
		if len(pts) > 0 {
			drawn = true
			if err := f.addSeries(p, pts, c); err != nil {
				return nil, fmt.Errorf("metric %s: %w", metric, err)
			}
		}
		if eval != "" {
			if epts := series(r.records, eval); len(epts) > 0 {
				drawn = true
				if err := addEval(p, epts, c); err != nil {
					return nil, fmt.Errorf("metric %s: %w", eval, err)
				}
				pts = append(pts, epts...)
			}
		}
		for _, pt := range pts {
			ymin, ymax = min(ymin, pt.Y), max(ymax, pt.Y)
		}
	}
	if !drawn {
		p.Title.Text += " (no finite values)"
		return p, nil
	}
	if ymin == ymax { // a constant asked for by --metrics: centre it on a readable axis
		d := math.Abs(ymin) / 2
		if d == 0 {
			d = 1
		}
		p.Y.Min, p.Y.Max = ymin-d, ymax+d
	}
	if eval != "" {
		if ymax > ymin { // headroom for the legend, above the curves
			p.Y.Max = ymax + 0.3*(ymax-ymin)
		}
		gray := color.RGBA{60, 60, 60, 255}
		train := &plotter.Line{LineStyle: draw.LineStyle{Color: gray, Width: vg.Points(1.5)}}
		ev := &plotter.Line{LineStyle: draw.LineStyle{Color: gray, Width: vg.Points(1.5), Dashes: evalDashes}}
		p.Legend.Add(metric, train)
		p.Legend.Add(eval, ev)
		p.Legend.Top = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
	}
	return p, nil
}

// addSeries draws one run's training series: the raw line (faded under its EMA when smoothing).
func (f *figure) addSeries(p *plot.Plot, pts plotter.XYs, c color.RGBA) error {
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Color, line.Width = c, vg.Points(1.5)
	marks := len(pts) <= 60
	if f.smooth > 0 {
		line.Color, line.Width = faded(c), vg.Points(1)
	}
	p.Add(line)
	if marks {
		s, err := plotter.NewScatter(pts)
		if err != nil {
			return err
		}
		s.Color, s.Radius = line.Color, vg.Points(2)
		p.Add(s)
	}
	if f.smooth > 0 {
		sm, err := plotter.NewLine(smoothEMA(pts, f.smooth))
		if err != nil {
			return err
		}
		sm.Color, sm.Width = c, vg.Points(2)
		p.Add(sm)
	}
	return nil
}

// addEval draws one run's eval series: dashed, with its points marked.
func addEval(p *plot.Plot, pts plotter.XYs, c color.RGBA) error {
	line, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	line.Color, line.Width, line.Dashes = c, vg.Points(1.5), evalDashes
	s, err := plotter.NewScatter(pts)
	if err != nil {
		return err
	}
	s.Color, s.Radius, s.Shape = c, vg.Points(2.5), draw.BoxGlyph{}
	p.Add(line, s)
	return nil
}

// smoothEMA is TensorBoard's scalar smoothing (tensorboard/components/vz_line_chart2/line-chart.ts,
// resmoothDataset): last = last·w + (1−w)·y from last = 0, divided by the debiasing 1 − w^n after
// n points; a constant series is left as it is. pts are finite.
func smoothEMA(pts plotter.XYs, w float64) plotter.XYs {
	out := slices.Clone(pts)
	if !slices.ContainsFunc(pts, func(p plotter.XY) bool { return p.Y != pts[0].Y }) {
		return out
	}
	last := 0.0
	for i, p := range pts {
		last = last*w + (1-w)*p.Y
		out[i].Y = last / (1 - math.Pow(w, float64(i+1)))
	}
	return out
}

// readableTicks places ticks as plot.DefaultTicks does and labels them with tickLabels.
type readableTicks struct {
	integers bool // label only integral ticks (steps), the others stay unlabelled
}

func (t readableTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.DefaultTicks{}.Ticks(lo, hi)
	var major []float64
	for i, tk := range ticks {
		if t.integers && tk.Label != "" && tk.Value != math.Round(tk.Value) {
			ticks[i].Label = ""
		}
		if ticks[i].Label != "" {
			major = append(major, tk.Value)
		}
	}
	labels := tickLabels(major)
	j := 0
	for i := range ticks {
		if ticks[i].Label != "" {
			ticks[i].Label = labels[j]
			j++
		}
	}
	return ticks
}

// tickLabels labels the tick values vs (ascending) at the scale of the largest: plain decimals
// from 0.001 to 10⁴ (0.5, 12.25), k/M/G/T above (120k, 1.5M), and a short exponent below or past
// 10¹⁵ (3e-4, 1.6e-6). The precision is the smallest that gives every tick its value (within a
// millionth of the spacing), so the labels are as short as they can be and distinct.
func tickLabels(vs []float64) []string {
	maxAbs, step := 0.0, math.Inf(1)
	for i, v := range vs {
		maxAbs = max(maxAbs, math.Abs(v))
		if i > 0 && vs[i]-vs[i-1] > 0 {
			step = min(step, vs[i]-vs[i-1])
		}
	}
	if math.IsInf(step, 1) {
		step = maxAbs
	}
	tol := 1e-6 * step
	labels := make([]string, len(vs))
	for prec := 0; prec <= 15; prec++ {
		exact := true
		for i, v := range vs {
			if math.Abs(v) <= 1e-9*step { // 0 computed as 1e-17
				v = 0
			}
			var back float64
			labels[i], back = formatTick(v, maxAbs, prec)
			exact = exact && math.Abs(back-v) <= tol
		}
		if exact {
			break
		}
	}
	return labels
}

// formatTick writes v with prec digits after the point in the notation of an axis whose largest
// tick is maxAbs, and returns the value the label reads as.
func formatTick(v, maxAbs float64, prec int) (string, float64) {
	if v == 0 {
		return "0", 0
	}
	switch {
	case maxAbs >= 1e4 && maxAbs < 1e15:
		unit, suffix := 1e3, "k"
		switch {
		case maxAbs >= 1e12:
			unit, suffix = 1e12, "T"
		case maxAbs >= 1e9:
			unit, suffix = 1e9, "G"
		case maxAbs >= 1e6:
			unit, suffix = 1e6, "M"
		}
		s := strconv.FormatFloat(v/unit, 'f', prec, 64)
		back, _ := strconv.ParseFloat(s, 64)
		return s + suffix, back * unit
	case maxAbs < 1e-3 || maxAbs >= 1e15:
		s := strconv.FormatFloat(v, 'e', prec, 64) // 1.6e-06
		back, _ := strconv.ParseFloat(s, 64)
		mant, exp, _ := strings.Cut(s, "e")
		sign := ""
		if exp[0] == '-' {
			sign = "-"
		}
		exp = strings.TrimLeft(exp[1:], "0")
		return mant + "e" + sign + exp, back
	default:
		s := strconv.FormatFloat(v, 'f', prec, 64)
		back, _ := strconv.ParseFloat(s, 64)
		return s, back
	}
}

// Figure layout: panels of 4×3 inches; the legend strip on top (several runs or smoothing), the
// constants' text below.
const (
	panelW, panelH = 4 * vg.Inch, 3 * vg.Inch
	textSize       = 10 // points
)

func figureText() text.Style {
	return text.Style{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(textSize)),
		Handler: plot.DefaultTextHandler, XAlign: draw.XLeft, YAlign: draw.YTop}
}

// header reports whether the figure has a legend strip: several runs, or smoothing.
func (f *figure) header() bool { return len(f.runs) > 1 || f.smooth > 0 }

// constantLines wraps "constant: a = 0, b = 3e-4, ..." into lines of width w at most.
func (f *figure) constantLines(w vg.Length) []string {
	if len(f.constants) == 0 {
		return nil
	}
	sty := figureText()
	var lines []string
	cur := "constant:"
	for i, c := range f.constants {
		item := " " + c
		if i < len(f.constants)-1 {
			item += ","
		}
		if sty.Width(cur+item) > w && cur != "" {
			lines = append(lines, cur)
			cur = strings.TrimPrefix(item, " ")
			continue
		}
		cur += item
	}
	return append(lines, cur)
}

// draw writes the figure to out in format.
func (f *figure) draw(out, format string) error {
	rows := max(1, (len(f.panels)+f.cols-1)/f.cols)
	cols := max(1, f.cols)
	w := vg.Length(cols) * panelW
	pad := vg.Millimeter * 3
	lineH := vg.Points(textSize * 1.4)
	var headH, footH vg.Length
	if f.header() {
		headH = lineH + 2*pad
	}
	consts := f.constantLines(w - 2*pad)
	if len(consts) > 0 {
		footH = vg.Length(len(consts))*lineH + 2*pad
	}
	h := vg.Length(rows)*panelH + headH + footH
	if len(f.panels) == 0 {
		h = headH + footH
	}
	canvas, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return fmt.Errorf("output %s: %w", out, err)
	}
	dc := draw.New(canvas)
	dc.SetColor(color.White) // PNG pixels between the panels would be transparent otherwise
	dc.Fill(dc.Rectangle.Path())
	sty := figureText()
	if f.header() {
		x, y := dc.Min.X+pad, dc.Max.Y-pad
		for i, r := range f.runs {
			if len(f.runs) == 1 {
				break
			}
			mid := y - lineH/2
			dc.StrokeLine2(draw.LineStyle{Color: runColor(i), Width: vg.Points(3)}, x, mid, x+vg.Points(20), mid)
			x += vg.Points(24)
			dc.FillText(sty, vg.Point{X: x, Y: y}, r.label)
			x += sty.Width(r.label) + vg.Points(16)
		}
		if f.smooth > 0 {
			note := fmt.Sprintf("faded: raw; bold: smoothed (EMA %g, TensorBoard's)", f.smooth)
			dc.FillText(sty, vg.Point{X: x, Y: y}, note)
		}
	}
	for i, line := range consts {
		dc.FillText(sty, vg.Point{X: dc.Min.X + pad, Y: dc.Min.Y + footH - pad - vg.Length(i)*lineH}, line)
	}
	if len(f.panels) > 0 {
		grid := make([][]*plot.Plot, rows)
		for i := range grid {
			grid[i] = make([]*plot.Plot, cols)
		}
		for i, p := range f.panels {
			grid[i/cols][i%cols] = p.plot
		}
		area := draw.Crop(dc, 0, 0, footH, -headH)
		tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
		canvases := plot.Align(grid, tiles, area)
		for i := range grid {
			for j, p := range grid[i] {
				if p != nil {
					p.Draw(canvases[i][j])
				}
			}
		}
	}
	file, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if _, err := canvas.WriteTo(file); err != nil {
		file.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := file.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
