package main

// `posttrain bench report`: gathers the stage records of scripts/gpu-check.sh into one JSON report
// (stage status, the log-prob check against HuggingFace transformers, throughput side by side with
// PyTorch) and prints a summary. Written in Go so that the CPU run needs no Python.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/urfave/cli/v3"
)

func benchReportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "write the gpu-check report (JSON) from stage records and print a summary",
		// --info values hold commas (nvidia-smi's CSV line, ptxas's version): one flag, one value.
		DisableSliceFlagSeparator: true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "stages", Required: true, Usage: "JSON lines, one per stage: {name, status, rc, seconds, result, note}"},
			&cli.StringFlag{Name: "out", Required: true, Usage: "report file to write"},
			&cli.StringSliceFlag{Name: "info", Usage: "KEY=VALUE recorded under info (repeatable)"},
			&cli.Float64Flag{Name: "tol-float32", Value: 2e-3, Usage: "largest accepted |Δ log-prob| in float32"},
			&cli.Float64Flag{Name: "tol-bfloat16", Value: 0.15, Usage: "largest accepted |Δ log-prob| in bfloat16"},
			&cli.StringFlag{Name: "probe-expected", Usage: "expected score output (JSON) of the probe stage, e.g. the tiny fixture's float64 reference"},
			&cli.Float64Flag{Name: "tol-probe", Value: 1e-4, Usage: "largest accepted |Δ log-prob| of the probe against --probe-expected"},
			&cli.BoolFlag{Name: "strict", Usage: "exit with status 1 when a stage failed or a check did not pass"},
			&cli.StringFlag{Name: "stopped", Usage: "why the run stopped after its first stages (the backend or the probe failed); empty when it did not"},
		},
		Action: func(ctx context.Context, cmd *cli.Command) error {
			info := map[string]string{}
			for _, kv := range cmd.StringSlice("info") {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usageError{fmt.Errorf("%s: --info %q: want KEY=VALUE", cmd.FullName(), kv)}
				}
				info[k] = v
			}
			rep, err := buildBenchReport(cmd.String("stages"), info, map[string]float64{
				"float32": cmd.Float64("tol-float32"), "bfloat16": cmd.Float64("tol-bfloat16")})
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.FullName(), err)
			}
			if rep.Stopped = cmd.String("stopped"); rep.Stopped != "" {
				rep.OK = false
			}
			if path := cmd.String("probe-expected"); path != "" {
				if err := rep.checkProbe(path, cmd.Float64("tol-probe")); err != nil {
					return fmt.Errorf("%s: %w", cmd.FullName(), err)
				}
			}
			data, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Dir(cmd.String("out")), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(cmd.String("out"), append(data, '\n'), 0o644); err != nil {
				return err
			}
			printBenchSummary(cmd.Root().Writer, rep)
			if cmd.Bool("strict") && !rep.OK {
				return errors.New("not every stage passed (see the report)")
			}
			return nil
		},
	}
}

// benchStage is one line of the stages file, as scripts/gpu-check.sh writes it.
type benchStage struct {
	Name    string  `json:"name"`
	Status  string  `json:"status"` // ok, failed, timeout, skipped
	RC      int     `json:"rc"`
	Seconds float64 `json:"seconds"`
	// CompileS is the time the stage's posttrain process spent compiling graphs (Builder.Compile,
	// Graphs of them), part of Seconds; nil for stages that compile nothing (PyTorch runs eagerly).
	CompileS *float64 `json:"compile_s"`
	Graphs   *int     `json:"graphs"`
	Note     string   `json:"note,omitempty"`
	Result   string   `json:"result,omitempty"` // path of the stage's JSON output, if any
	// Data is the parsed result (filled by the report).
	Data any `json:"data,omitempty"`
}

type benchLogprobCheck struct {
	Tokens      int     `json:"tokens"`
	MaxAbsDiff  float64 `json:"max_abs_diff"`
	MeanAbsDiff float64 `json:"mean_abs_diff"`
	LossGo      float64 `json:"loss_posttrain"`
	LossRef     float64 `json:"loss_reference"`
	Tolerance   float64 `json:"tolerance"`
	Pass        bool    `json:"pass"`
	Error       string  `json:"error,omitempty"`
}

// benchSideBySide is one workload measured on both sides; Ratio = posttrain speed / PyTorch speed
// (> 1: posttrain is faster).
type benchSideBySide struct {
	Workload  string   `json:"workload"`
	Metric    string   `json:"metric"`
	Posttrain *float64 `json:"posttrain"`
	PyTorch   *float64 `json:"pytorch"`
	Ratio     *float64 `json:"posttrain_over_pytorch"`
	// MFU of the training part where a peak was given.
	PosttrainMFU *float64 `json:"posttrain_mfu,omitempty"`
	PyTorchMFU   *float64 `json:"pytorch_mfu,omitempty"`
	higherBetter bool
}

type benchGPUReport struct {
	Schema     string                        `json:"schema"`
	Date       string                        `json:"date"`
	Info       map[string]string             `json:"info"`
	OK         bool                          `json:"ok"`
	Stopped    string                        `json:"stopped,omitempty"`
	Failed     []string                      `json:"failed_stages"`
	Stages     []benchStage                  `json:"stages"`
	LogProbs   map[string]*benchLogprobCheck `json:"logprob_check"`
	Parity     *benchParityCheck             `json:"parity_check,omitempty"`
	Throughput []benchSideBySide             `json:"throughput"`
}

func buildBenchReport(stagesPath string, info map[string]string, tol map[string]float64) (*benchGPUReport, error) {
	f, err := os.Open(stagesPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rep := &benchGPUReport{Schema: "posttrain-gpu-check/1", Date: time.Now().UTC().Format(time.RFC3339), Info: info,
		LogProbs: map[string]*benchLogprobCheck{}, Failed: []string{}}
	byName := map[string]*benchStage{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var s benchStage
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", stagesPath, line, err)
		}
		if s.Result != "" && s.Status == "ok" {
			if data, err := os.ReadFile(s.Result); err != nil {
				s.Status, s.Note = "failed", "no result: "+err.Error()
			} else if err := json.Unmarshal(data, &s.Data); err != nil {
				s.Status, s.Note = "failed", "result is not JSON: "+err.Error()
			}
		}
		rep.Stages = append(rep.Stages, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i := range rep.Stages {
		s := &rep.Stages[i]
		byName[s.Name] = s
		if s.Status != "ok" && s.Status != "skipped" {
			rep.Failed = append(rep.Failed, s.Name)
		}
	}
	rep.OK = len(rep.Failed) == 0 && len(rep.Stages) > 0
	for _, dt := range []string{"float32", "bfloat16"} {
		g, h := byName["score_go_"+dt], byName["score_hf_"+dt]
		if g == nil || h == nil || g.Status != "ok" || h.Status != "ok" {
			continue
		}
		c := benchCompareLogProbs(g.Data, h.Data)
		c.Tolerance = tol[dt]
		c.Pass = c.Error == "" && c.MaxAbsDiff <= c.Tolerance
		rep.LogProbs[dt] = c
		if !c.Pass {
			rep.OK = false
			rep.Failed = append(rep.Failed, "logprob_check_"+dt)
		}
	}
	if g, h := byName["parity_go"], byName["parity_hf"]; g != nil && h != nil && g.Status == "ok" && h.Status == "ok" {
		rep.Parity = benchCompareParity(g.Data, h.Data, tol["float32"])
		if !rep.Parity.Pass {
			rep.OK = false
			rep.Failed = append(rep.Failed, "parity_check")
		}
	}
	rep.Throughput = benchThroughputTable(byName)
	return rep, nil
}

// benchProbeCheck is the key of the probe's check in the report's logprob_check.
const benchProbeCheck = "probe_tiny_fixture_vs_float64"

// checkProbe compares the probe stage's score output with an expected one (when the probe ran).
func (rep *benchGPUReport) checkProbe(expectedPath string, tol float64) error {
	var probe *benchStage
	for i := range rep.Stages {
		if rep.Stages[i].Name == "probe" && rep.Stages[i].Status == "ok" {
			probe = &rep.Stages[i]
		}
	}
	if probe == nil {
		return nil
	}
	data, err := os.ReadFile(expectedPath)
	if err != nil {
		return err
	}
	var want any
	if err := json.Unmarshal(data, &want); err != nil {
		return fmt.Errorf("%s: %w", expectedPath, err)
	}
	c := benchCompareLogProbs(probe.Data, want)
	c.Tolerance = tol
	c.Pass = c.Error == "" && c.MaxAbsDiff <= tol
	rep.LogProbs[benchProbeCheck] = c
	if !c.Pass {
		rep.OK = false
		rep.Failed = append(rep.Failed, "logprob_check_probe")
	}
	return nil
}

// benchCompareLogProbs compares the token_logprobs of two score outputs at the same positions.
func benchCompareLogProbs(goOut, hfOut any) *benchLogprobCheck {
	c := &benchLogprobCheck{}
	g, h := benchAsMap(goOut), benchAsMap(hfOut)
	gl, hl := benchAsMatrix(g["token_logprobs"]), benchAsMatrix(h["token_logprobs"])
	gp, hp := benchAsMatrix(g["token_positions"]), benchAsMatrix(h["token_positions"])
	c.LossGo, _ = g["loss"].(float64)
	c.LossRef, _ = h["loss"].(float64)
	if len(gl) == 0 || len(gl) != len(hl) || len(gp) != len(hp) {
		c.Error = fmt.Sprintf("rows differ: %d posttrain, %d transformers", len(gl), len(hl))
		return c
	}
	sum := 0.0
	for r := range gl {
		if len(gl[r]) != len(hl[r]) || (gp != nil && !benchFloatsEqual(gp[r], hp[r])) {
			c.Error = fmt.Sprintf("row %d: the scored positions differ", r)
			return c
		}
		for t := range gl[r] {
			d := math.Abs(gl[r][t] - hl[r][t])
			if math.IsNaN(d) {
				c.Error = fmt.Sprintf("row %d token %d: NaN", r, t)
				d = math.Inf(1)
			}
			c.MaxAbsDiff = math.Max(c.MaxAbsDiff, d)
			sum += d
			c.Tokens++
		}
	}
	if c.Tokens > 0 {
		c.MeanAbsDiff = sum / float64(c.Tokens)
	}
	return c
}

func benchFloatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func benchAsMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func benchAsMatrix(v any) [][]float64 {
	rows, _ := v.([]any)
	var out [][]float64
	for _, r := range rows {
		cols, _ := r.([]any)
		row := make([]float64, 0, len(cols))
		for _, x := range cols {
			f, _ := x.(float64)
			row = append(row, f)
		}
		out = append(out, row)
	}
	return out
}

// num returns m[key] as a number, nil when absent.
func benchNum(m map[string]any, key string) *float64 {
	if f, ok := m[key].(float64); ok {
		return &f
	}
	return nil
}

func benchStageData(byName map[string]*benchStage, name string) map[string]any {
	if s := byName[name]; s != nil && s.Status == "ok" {
		return benchAsMap(s.Data)
	}
	return nil
}

func benchThroughputTable(byName map[string]*benchStage) []benchSideBySide {
	var rows []benchSideBySide
	add := func(r benchSideBySide) {
		if r.Posttrain == nil && r.PyTorch == nil {
			return
		}
		if r.Posttrain != nil && r.PyTorch != nil && *r.Posttrain > 0 && *r.PyTorch > 0 {
			x := *r.Posttrain / *r.PyTorch
			if !r.higherBetter {
				x = 1 / x
			}
			r.Ratio = &x
		}
		rows = append(rows, r)
	}
	// Decoding: one row per batch size found on either side.
	// Decoding: the runs of every stage named decode_go* (posttrain) or decode_hf* (PyTorch), so a
	// workload may be split into one stage per batch size.
	perBatch := map[int]*benchSideBySide{}
	for name, st := range byName {
		side := -1
		switch {
		case strings.HasPrefix(name, "decode_go"):
			side = 0
		case strings.HasPrefix(name, "decode_hf"):
			side = 1
		}
		if side < 0 || st.Status != "ok" {
			continue
		}
		runs, _ := benchAsMap(st.Data)["runs"].([]any)
		for _, r := range runs {
			m := benchAsMap(r)
			b, ok := m["batch"].(float64)
			if !ok {
				continue
			}
			row := perBatch[int(b)]
			if row == nil {
				row = &benchSideBySide{Workload: fmt.Sprintf("decode batch %d", int(b)), Metric: "tokens/s", higherBetter: true}
				perBatch[int(b)] = row
			}
			if side == 0 {
				row.Posttrain = benchNum(m, "tokens_per_s")
			} else {
				row.PyTorch = benchNum(m, "tokens_per_s")
			}
		}
	}
	batches := make([]int, 0, len(perBatch))
	for b := range perBatch {
		batches = append(batches, b)
	}
	sort.Ints(batches)
	for _, b := range batches {
		add(*perBatch[b])
	}
	if gs, hs := benchStageData(byName, "sft_go"), benchStageData(byName, "sft_hf"); gs != nil || hs != nil {
		name := "sft step"
		if d := benchFirstNonNil(gs, hs); d != nil {
			if b, s := benchNum(d, "batch"), benchNum(d, "seq_len"); b != nil && s != nil {
				name = fmt.Sprintf("sft step %d×%d", int(*b), int(*s))
			}
		}
		add(benchSideBySide{Workload: name, Metric: "tokens/s", Posttrain: benchNum(gs, "tokens_per_s"), PyTorch: benchNum(hs, "tokens_per_s"),
			PosttrainMFU: benchNum(gs, "mfu"), PyTorchMFU: benchNum(hs, "mfu"), higherBetter: true})
	}
	if gg, hg := benchStageData(byName, "grpo_go"), benchStageData(byName, "grpo_hf"); gg != nil || hg != nil {
		name := "grpo step"
		if d := benchFirstNonNil(gg, hg); d != nil {
			if p, g, c := benchNum(d, "prompts"), benchNum(d, "generations"), benchNum(d, "new_tokens"); p != nil && g != nil && c != nil {
				name = fmt.Sprintf("grpo step %d×%d×%d", int(*p), int(*g), int(*c))
			}
		}
		add(benchSideBySide{Workload: name, Metric: "seconds", Posttrain: benchNum(gg, "step_s"), PyTorch: benchNum(hg, "step_s"),
			PosttrainMFU: benchNum(gg, "train_mfu"), PyTorchMFU: benchNum(hg, "train_mfu")})
		add(benchSideBySide{Workload: name + ": generation", Metric: "seconds", Posttrain: benchNum(gg, "generate_s"), PyTorch: benchNum(hg, "generate_s")})
		add(benchSideBySide{Workload: name + ": update", Metric: "seconds", Posttrain: benchNum(gg, "train_s"), PyTorch: benchNum(hg, "train_s")})
	}
	return rows
}

func benchFirstNonNil(ms ...map[string]any) map[string]any {
	for _, m := range ms {
		if m != nil {
			return m
		}
	}
	return nil
}

func benchFmtNum(p *float64, format string) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf(format, *p)
}
