package bench

// The gpu-check report: gathers the stage records of scripts/gpu-check.sh into one JSON report
// (stage status, the log-prob check against HuggingFace transformers, training parity, throughput
// side by side with PyTorch). Written in Go so that the CPU run needs no Python. Each stage keeps
// its JSON output verbatim (Stage.Data); the checks and the throughput table decode it into the
// workload's result type (or, for `posttrain score` and the trainers, into the part they read).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Stage is one line of the stages file, as scripts/gpu-check.sh writes it.
type Stage struct {
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
	// Data is the stage's JSON output, verbatim (filled by the report).
	Data json.RawMessage `json:"data,omitempty"`
}

// LogProbCheck compares the per-token log-probs of two score outputs.
type LogProbCheck struct {
	Tokens      int     `json:"tokens"`
	MaxAbsDiff  float64 `json:"max_abs_diff"`
	MeanAbsDiff float64 `json:"mean_abs_diff"`
	LossGo      float64 `json:"loss_posttrain"`
	LossRef     float64 `json:"loss_reference"`
	Tolerance   float64 `json:"tolerance"`
	Pass        bool    `json:"pass"`
	Error       string  `json:"error,omitempty"`
}

// SideBySide is one workload measured on both sides; Ratio = posttrain speed / PyTorch speed
// (> 1: posttrain is faster).
type SideBySide struct {
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

// Report is report.json.
type Report struct {
	Schema     string                   `json:"schema"`
	Date       string                   `json:"date"`
	Info       map[string]string        `json:"info"`
	OK         bool                     `json:"ok"`
	Stopped    string                   `json:"stopped,omitempty"`
	Failed     []string                 `json:"failed_stages"`
	Stages     []Stage                  `json:"stages"`
	LogProbs   map[string]*LogProbCheck `json:"logprob_check"`
	Parity     *ParityCheck             `json:"parity_check,omitempty"`
	Throughput []SideBySide             `json:"throughput"`
}

// ProbeCheck is the key of the probe's check in the report's logprob_check.
const ProbeCheck = "probe_tiny_fixture_vs_float64"

// scoreLogProbs is the part of a score output (`posttrain score`'s decoder.Report, hf_reference.py
// score, the fixture's expected files) that the log-prob checks read.
type scoreLogProbs struct {
	TokenPositions [][]int     `json:"token_positions"`
	TokenLogProbs  [][]float64 `json:"token_logprobs"`
	Loss           float64     `json:"loss"`
}

// trainerMetrics is a trainer stage's result: its metrics.jsonl lines (TRL's names → numbers or
// strings), which gpu-check.sh wraps as {"metrics": [...]}.
type trainerMetrics struct {
	Metrics []map[string]any `json:"metrics"`
}

// BuildReport reads the stages file (JSON lines, see Stage) and each ok stage's result, and runs
// the checks: log-probs of score_go_<dtype> against score_hf_<dtype> within tol[dtype], parity_go
// against parity_hf within tol["float32"] (relative), and the throughput table.
func BuildReport(stagesPath string, info map[string]string, tol map[string]float64) (*Report, error) {
	stages, err := readStages(stagesPath)
	if err != nil {
		return nil, err
	}
	rep := &Report{Schema: "posttrain-gpu-check/1", Date: time.Now().UTC().Format(time.RFC3339), Info: info,
		LogProbs: map[string]*LogProbCheck{}, Failed: []string{}, Stages: stages}
	byName := map[string]*Stage{}
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
		rep.addLogProbCheck(dt, "logprob_check_"+dt, compareLogProbs(g.Data, h.Data), tol[dt])
	}
	if g, h := byName["parity_go"], byName["parity_hf"]; g != nil && h != nil && g.Status == "ok" && h.Status == "ok" {
		rep.Parity = compareParityStages(g.Data, h.Data, tol["float32"])
		if !rep.Parity.Pass {
			rep.OK = false
			rep.Failed = append(rep.Failed, "parity_check")
		}
	}
	rep.Throughput = throughputTable(byName)
	return rep, nil
}

// readStages reads the stages file and the result of each ok stage that names one; a result that
// cannot be read or is not JSON fails its stage.
func readStages(path string) ([]Stage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var stages []Stage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var s Stage
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if s.Result != "" && s.Status == "ok" {
			if data, err := os.ReadFile(s.Result); err != nil {
				s.Status, s.Note = "failed", "no result: "+err.Error()
			} else if err := json.Unmarshal(data, &s.Data); err != nil {
				s.Status, s.Note = "failed", "result is not JSON: "+err.Error()
			}
		}
		stages = append(stages, s)
	}
	return stages, sc.Err()
}

// addLogProbCheck records a log-prob check under key; a failed one fails the report as failName.
func (rep *Report) addLogProbCheck(key, failName string, c *LogProbCheck, tol float64) {
	c.Tolerance = tol
	c.Pass = c.Error == "" && c.MaxAbsDiff <= tol
	rep.LogProbs[key] = c
	if !c.Pass {
		rep.OK = false
		rep.Failed = append(rep.Failed, failName)
	}
}

// CheckProbe compares the probe stage's score output with an expected one (when the probe ran).
func (rep *Report) CheckProbe(expectedPath string, tol float64) error {
	var probe *Stage
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
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("%s: %w", expectedPath, err)
	}
	rep.addLogProbCheck(ProbeCheck, "logprob_check_probe", compareLogProbs(probe.Data, data), tol)
	return nil
}

// Write writes the report as indented JSON to path, creating its directory.
func (rep *Report) Write(path string) error {
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// compareLogProbs compares the token_logprobs of two score outputs at the same positions.
func compareLogProbs(goOut, refOut json.RawMessage) *LogProbCheck {
	c := &LogProbCheck{}
	var g, h scoreLogProbs
	if err := json.Unmarshal(goOut, &g); err != nil {
		c.Error = "posttrain's score output: " + err.Error()
		return c
	}
	if err := json.Unmarshal(refOut, &h); err != nil {
		c.Error = "the reference score output: " + err.Error()
		return c
	}
	c.LossGo, c.LossRef = g.Loss, h.Loss
	gl, hl, gp, hp := g.TokenLogProbs, h.TokenLogProbs, g.TokenPositions, h.TokenPositions
	if len(gl) == 0 || len(gl) != len(hl) || len(gp) != len(hp) {
		c.Error = fmt.Sprintf("rows differ: %d posttrain, %d transformers", len(gl), len(hl))
		return c
	}
	sum := 0.0
	for r := range gl {
		if len(gl[r]) != len(hl[r]) || (len(gp) > 0 && !slices.Equal(gp[r], hp[r])) {
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

// compareParityStages decodes the two parity outputs and compares them (CompareParity).
func compareParityStages(goOut, refOut json.RawMessage, tol float64) *ParityCheck {
	var g, h ParityResult
	errG, errH := json.Unmarshal(goOut, &g), json.Unmarshal(refOut, &h)
	c := CompareParity(&g, &h, tol)
	switch {
	case errG != nil:
		c.Error, c.Pass = "posttrain's parity output: "+errG.Error(), false
	case errH != nil:
		c.Error, c.Pass = "pytorch's parity output: "+errH.Error(), false
	}
	return c
}

// stageResult decodes the result of the stage name into a T; nil when the stage is absent, did not
// pass, or its result is not a T.
func stageResult[T any](byName map[string]*Stage, name string) *T {
	s := byName[name]
	if s == nil {
		return nil
	}
	return decodeResult[T](s)
}

// decodeResult decodes an ok stage's result into a T; nil when the stage did not pass or its
// result is not a T.
func decodeResult[T any](s *Stage) *T {
	if s.Status != "ok" || len(s.Data) == 0 {
		return nil
	}
	v := new(T)
	if err := json.Unmarshal(s.Data, v); err != nil {
		return nil
	}
	return v
}
