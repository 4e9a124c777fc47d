// Command cpucompare is the table of `make bench` (scripts/bench-cpu.sh): it reads the sides file
// that the script writes (one JSON line per side per round: the side, its start time, the
// 1-minute load average right before it, its output file), writes every round's figures to one
// JSON file, and prints, per workload, the median over the rounds of the per-round ratio
// posttrain ÷ PyTorch, its min and max, and the medians of the figures. It refuses (one line,
// exit 1) when in some round the load averages before a posttrain side and before the PyTorch
// side differ by more than MaxLoadGap; the JSON file is written all the same.
//
//	go run ./bench/cpucompare -sides sides.jsonl -out bench-results.json [-commit abc1234] [-quick "1 round"]
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"
)

// Results is the JSON file of a `make bench` run: every side of every round as measured, and the
// comparisons when the loads allowed them.
type Results struct {
	Schema      string       `json:"schema"`
	Date        string       `json:"date"`
	Commit      string       `json:"commit"`
	CPUs        int          `json:"cpus"`
	Torch       string       `json:"torch"`
	Threads     int          `json:"threads"` // PyTorch's
	Quick       string       `json:"quick,omitempty"`
	MaxLoadGap  float64      `json:"max_load_gap"`
	Sides       []SideRun    `json:"sides"` // in the order they ran
	Comparisons []Comparison `json:"comparisons,omitempty"`
	// Refused says why there is no table (a load gap, a failed side); empty when there is one.
	Refused string `json:"refused,omitempty"`
}

func main() {
	sides := flag.String("sides", "", "the sides file (JSON lines) of scripts/bench-cpu.sh")
	out := flag.String("out", "bench-results.json", "the JSON file of all rounds to write")
	commit := flag.String("commit", "unknown", "the commit measured")
	quick := flag.String("quick", "", "why this run is a quick look (fewer rounds, fewer workloads), if it is one")
	flag.Parse()
	if err := run(os.Stdout, *sides, *out, *commit, *quick); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// run reads the sides, writes the JSON file to outPath and the table to w, or returns why not.
func run(w io.Writer, sidesPath, outPath, commit, quick string) error {
	runs, err := ReadSides(sidesPath)
	if err != nil {
		return err
	}
	res := &Results{Schema: "posttrain-cpu-bench/1", Date: time.Now().UTC().Format(time.RFC3339), Commit: commit,
		CPUs: runtime.NumCPU(), Quick: quick, MaxLoadGap: MaxLoadGap, Sides: runs}
	for _, r := range runs {
		var p pytorchOutput
		if r.Side == SidePyTorch && json.Unmarshal(r.Raw, &p) == nil && res.Torch == "" {
			res.Torch, res.Threads = p.Torch, p.Threads
		}
	}
	rounds, err := GroupRounds(runs)
	if err == nil {
		err = CheckLoads(rounds)
	}
	if err != nil {
		res.Refused = err.Error()
		if werr := write(outPath, res); werr != nil {
			return werr
		}
		return fmt.Errorf("%w (every round's figures: %s)", err, outPath)
	}
	res.Comparisons = Compare(rounds)
	if err := write(outPath, res); err != nil {
		return err
	}
	PrintTable(w, res, rounds)
	return nil
}

func write(path string, res *Results) error {
	data, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
