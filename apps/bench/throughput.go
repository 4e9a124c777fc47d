package bench

import (
	"fmt"
	"sort"
	"strings"
)

// throughputTable puts each workload's figures of the two sides next to each other: decoding per
// batch size, the SFT step, the GRPO step and its generation and update parts.
func throughputTable(byName map[string]*Stage) []SideBySide {
	var rows []SideBySide
	add := func(r SideBySide) {
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
	for _, r := range decodeRows(byName) {
		add(r)
	}
	gs, hs := stageResult[SFTResult](byName, "sft_go"), stageResult[SFTResult](byName, "sft_hf")
	if d := firstNonNil(gs, hs); d != nil {
		row := SideBySide{Workload: fmt.Sprintf("sft step %d×%d", d.Batch, d.SeqLen), Metric: "tokens/s", higherBetter: true}
		row.Posttrain, row.PosttrainMFU = sftFigures(gs)
		row.PyTorch, row.PyTorchMFU = sftFigures(hs)
		add(row)
	}
	gg, hg := stageResult[GRPOResult](byName, "grpo_go"), stageResult[GRPOResult](byName, "grpo_hf")
	if d := firstNonNil(gg, hg); d != nil {
		name := fmt.Sprintf("grpo step %d×%d×%d", d.Prompts, d.Generations, d.NewTokens)
		gStep, gGen, gTrain, gMFU := grpoFigures(gg)
		hStep, hGen, hTrain, hMFU := grpoFigures(hg)
		add(SideBySide{Workload: name, Metric: "seconds", Posttrain: gStep, PyTorch: hStep, PosttrainMFU: gMFU, PyTorchMFU: hMFU})
		add(SideBySide{Workload: name + ": generation", Metric: "seconds", Posttrain: gGen, PyTorch: hGen})
		add(SideBySide{Workload: name + ": update", Metric: "seconds", Posttrain: gTrain, PyTorch: hTrain})
	}
	return rows
}

// decodeRows are the decoding rows, one per batch size and decode steps per execution found on
// either side: the runs of every ok stage named decode_go* (posttrain) or decode_hf* (PyTorch), so
// a workload may be split into one stage per batch size. Runs of several decode steps per
// execution (decode_go_steps) get rows of their own, without a PyTorch side.
func decodeRows(byName map[string]*Stage) []SideBySide {
	type key struct{ batch, steps int }
	perRun := map[key]*SideBySide{}
	for name, st := range byName {
		goSide := strings.HasPrefix(name, "decode_go")
		if !goSide && !strings.HasPrefix(name, "decode_hf") {
			continue
		}
		res := decodeResult[DecodeResult](st)
		if res == nil {
			continue
		}
		for _, run := range res.Runs {
			k := key{run.Batch, max(1, run.StepsPerCall)}
			row := perRun[k]
			if row == nil {
				row = &SideBySide{Workload: fmt.Sprintf("decode batch %d", run.Batch), Metric: "tokens/s", higherBetter: true}
				if k.steps > 1 {
					row.Workload += fmt.Sprintf(", %d steps a call", k.steps)
				}
				perRun[k] = row
			}
			tps := run.TokensPerSecond
			if goSide {
				row.Posttrain = &tps
			} else {
				row.PyTorch = &tps
			}
		}
	}
	keys := make([]key, 0, len(perRun))
	for k := range perRun {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].batch < keys[j].batch || keys[i].batch == keys[j].batch && keys[i].steps < keys[j].steps
	})
	rows := make([]SideBySide, 0, len(keys))
	for _, k := range keys {
		rows = append(rows, *perRun[k])
	}
	return rows
}

func firstNonNil[T any](xs ...*T) *T {
	for _, x := range xs {
		if x != nil {
			return x
		}
	}
	return nil
}

// sftFigures are an SFT result's tokens/s and MFU (nil for an absent side).
func sftFigures(r *SFTResult) (tokensPerS, mfu *float64) {
	if r == nil {
		return nil, nil
	}
	return &r.TokensPerS, r.MFU
}

// grpoFigures are a GRPO result's step, generation and update seconds and the update's MFU (nil for
// an absent side).
func grpoFigures(r *GRPOResult) (step, generate, train, mfu *float64) {
	if r == nil {
		return nil, nil, nil, nil
	}
	return &r.StepS, &r.GenerateS, &r.TrainS, r.TrainMFU
}
