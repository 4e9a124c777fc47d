package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Stat is the median, minimum and maximum of a figure over the rounds that have it.
type Stat struct {
	Median float64   `json:"median"`
	Min    float64   `json:"min"`
	Max    float64   `json:"max"`
	Rounds []float64 `json:"rounds"` // per round, in round order
}

// NewStat summarizes xs; ok is false when xs is empty.
func NewStat(xs []float64) (Stat, bool) {
	if len(xs) == 0 {
		return Stat{}, false
	}
	s := slices.Sorted(slices.Values(xs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: med, Min: s[0], Max: s[len(s)-1], Rounds: xs}, true
}

// Ratio is one round's comparison of a workload: posttrain's time ÷ PyTorch's, or for a rate
// PyTorch's ÷ posttrain's, so that below 1 posttrain is faster. ok is false when a side lacks the
// figure.
func Ratio(w Workload, posttrain, pytorch map[string]float64) (float64, bool) {
	p, okP := posttrain[w.Key]
	t, okT := pytorch[w.Key]
	if !okP || !okT || p <= 0 || t <= 0 {
		return 0, false
	}
	if w.RateBetter() {
		return t / p, true
	}
	return p / t, true
}

// Comparison is one workload on one posttrain backend against PyTorch over the rounds.
type Comparison struct {
	Workload  string `json:"workload"`
	Backend   string `json:"backend"`
	Key       string `json:"key"`
	Posttrain *Stat  `json:"posttrain"` // the figure's median over the rounds, and its range
	PyTorch   *Stat  `json:"pytorch"`
	// Ratio summarizes the per-round ratios (Ratio): their median, min and max.
	Ratio    *Stat `json:"ratio"`
	CompileS *Stat `json:"compile_s"`
	// TimedCompiles is the most graphs any round compiled inside the timed runs (0: none recompiled).
	TimedCompiles float64 `json:"timed_compiles"`
}

// Compare computes, for every posttrain side and workload, the per-round ratios and their median,
// min and max, and the medians of the absolute figures.
func Compare(rounds []Round) []Comparison {
	var out []Comparison
	for _, side := range posttrainSides(rounds[0]) {
		for _, w := range Workloads {
			var ratios, post, torch, comp []float64
			c := Comparison{Workload: w.Name, Backend: side, Key: w.Key}
			for _, rd := range rounds {
				g, t := rd.Sides[side].Figures[w.Name], rd.Sides[SidePyTorch].Figures[w.Name]
				if r, ok := Ratio(w, g, t); ok {
					ratios = append(ratios, r)
				}
				post, torch, comp = appendFigure(post, g, w.Key), appendFigure(torch, t, w.Key), appendFigure(comp, g, "compile_s")
				c.TimedCompiles = max(c.TimedCompiles, g["timed_compiles"])
			}
			c.Ratio, c.Posttrain, c.PyTorch, c.CompileS = stat(ratios), stat(post), stat(torch), stat(comp)
			out = append(out, c)
		}
	}
	return out
}

func appendFigure(xs []float64, fig map[string]float64, key string) []float64 {
	if v, ok := fig[key]; ok {
		return append(xs, v)
	}
	return xs
}

func stat(xs []float64) *Stat {
	if s, ok := NewStat(xs); ok {
		return &s
	}
	return nil
}

// details are the figures besides the compared one that the table lists (medians).
var details = []struct{ workload, key, label string }{
	{"grpo", "generate_s", "GRPO step: sampling"},
	{"grpo", "update_s", "GRPO step: update"},
	{"decode", "prefill_s", "decode float32: 8-token prompt pass"},
	{"decode_bf16", "prefill_s", "decode bfloat16: 8-token prompt pass"},
}

// PrintTable writes the results as markdown: a header naming the run, the comparison table, the
// details and every side's load average.
func PrintTable(w io.Writer, res *Results, rounds []Round) {
	sides := posttrainSides(rounds[0])
	if res.Quick != "" {
		fmt.Fprintf(w, "QUICK LOOK, not for docs/benchmarks.md: %s.\n\n", res.Quick)
	}
	fmt.Fprintf(w, "`make bench`, %s, commit %s, %d CPUs; %s, the sides interleaved (odd rounds %s, even rounds the reverse); PyTorch %s on %d threads.\n",
		timeSpan(res.Sides), res.Commit, res.CPUs, plural(len(rounds), "round"), orderText(res.Sides, rounds[0].N), res.Torch, res.Threads)
	fmt.Fprintln(w, "Ratios: each round's posttrain time ÷ PyTorch time (decode: PyTorch tokens/s ÷ posttrain tokens/s), "+
		"below 1 = posttrain faster; the median over the rounds (min–max). Figures: medians over the rounds.")
	fmt.Fprintln(w)
	head := []string{"workload"}
	for _, s := range sides {
		head = append(head, "posttrain, "+sideName(s))
	}
	head = append(head, fmt.Sprintf("PyTorch %s (%d threads)", res.Torch, res.Threads))
	for _, s := range sides {
		head = append(head, sideName(s)+" ÷ PyTorch, median (min–max)")
	}
	head = append(head, "compile time, "+strings.Join(mapStrings(sides, sideName), " / "))
	row(w, head)
	row(w, slices.Repeat([]string{"---"}, len(head)))
	byKey := map[string]Comparison{}
	for _, c := range res.Comparisons {
		byKey[c.Backend+"/"+c.Workload] = c
	}
	for _, wl := range Workloads {
		if c := byKey[sides[0]+"/"+wl.Name]; c.Posttrain == nil && c.PyTorch == nil {
			continue // not run (BENCH_ONLY)
		}
		cells := []string{wl.Label}
		var ratios, compiles []string
		for _, s := range sides {
			c := byKey[s+"/"+wl.Name]
			cells = append(cells, figure(c.Posttrain, wl.Unit))
			ratios = append(ratios, ratioCell(c.Ratio))
			compiles = append(compiles, compileCell(c))
		}
		cells = append(cells, figure(byKey[sides[0]+"/"+wl.Name].PyTorch, wl.Unit))
		row(w, append(append(cells, ratios...), strings.Join(compiles, " / ")))
	}
	printDetails(w, sides, rounds)
	printLoads(w, sides, rounds)
}

func printDetails(w io.Writer, sides []string, rounds []Round) {
	fmt.Fprintln(w)
	all := append(slices.Clone(sides), SidePyTorch)
	row(w, append([]string{"detail (median)"}, mapStrings(all, sideName)...))
	row(w, slices.Repeat([]string{"---"}, len(all)+1))
	for _, d := range details {
		cells, measured := []string{d.label}, false
		for _, s := range all {
			var xs []float64
			for _, rd := range rounds {
				xs = appendFigure(xs, rd.Sides[s].Figures[d.workload], d.key)
			}
			measured = measured || len(xs) > 0
			cells = append(cells, figure(stat(xs), "s"))
		}
		if measured {
			row(w, cells)
		}
	}
}

func printLoads(w io.Writer, sides []string, rounds []Round) {
	fmt.Fprintln(w)
	all := append(slices.Clone(sides), SidePyTorch)
	head := []string{"round"}
	for _, s := range all {
		head = append(head, sideName(s)+": start, load before → after, wall time")
	}
	row(w, head)
	row(w, slices.Repeat([]string{"---"}, len(head)))
	for _, rd := range rounds {
		cells := []string{fmt.Sprint(rd.N)}
		for _, s := range all {
			r := rd.Sides[s]
			cells = append(cells, fmt.Sprintf("%s, %.2f → %.2f, %.0f s", clock(r.Start), r.Load1, r.Load1After, r.Seconds))
		}
		row(w, cells)
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func row(w io.Writer, cells []string) { fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | ")) }

func mapStrings(xs []string, f func(string) string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func figure(s *Stat, unit string) string {
	switch {
	case s == nil:
		return "missing"
	case unit == "tokens/s":
		return fmt.Sprintf("%.2f tokens/s", s.Median)
	}
	return fmt.Sprintf("%.3f s", s.Median)
}

func ratioCell(s *Stat) string {
	if s == nil {
		return "n/a"
	}
	if len(s.Rounds) == 1 {
		return fmt.Sprintf("%.2f× (1 round)", s.Median)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", s.Median, s.Min, s.Max)
}

func compileCell(c Comparison) string {
	if c.CompileS == nil {
		return "n/a"
	}
	s := fmt.Sprintf("%.1f s", c.CompileS.Median)
	if c.TimedCompiles > 0 {
		s += fmt.Sprintf(" (%.0f in the timed runs)", c.TimedCompiles)
	}
	return s
}

// orderText is the order of the sides in round n (e.g. "xla:cpu then PyTorch").
func orderText(runs []SideRun, n int) string {
	var names []string
	for _, r := range runs {
		if r.Round == n {
			names = append(names, sideName(r.Side))
		}
	}
	return strings.Join(names, " then ")
}

// timeSpan is the UTC span from the first side's start to the last side's end.
func timeSpan(runs []SideRun) string {
	var first, last time.Time
	for _, r := range runs {
		t, err := time.Parse(time.RFC3339, r.Start)
		if err != nil {
			continue
		}
		end := t.Add(time.Duration(r.Seconds * float64(time.Second)))
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if end.After(last) {
			last = end
		}
	}
	if first.IsZero() {
		return "time unknown"
	}
	return first.Format("2006-01-02 15:04") + "–" + last.Format("15:04") + " UTC"
}

func clock(start string) string {
	if t, err := time.Parse(time.RFC3339, start); err == nil {
		return t.Format("15:04:05")
	}
	return start
}
