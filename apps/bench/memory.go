package bench

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/trainers/engine/trainable"
)

// Memory is what a training workload holds: the parameters the optimizer updates, the bytes of
// every variable of the model's context (weights, bfloat16 copies, float32 masters, adapters,
// gradient accumulators, AdamW moments: the state that scales with the model), and the
// process's peak resident set (Linux's VmHWM, since the load; 0 where unknown), which adds the
// activations, the compiled graphs and the Go runtime.
type Memory struct {
	TrainableParams int   `json:"trainable_params"`
	StateBytes      int64 `json:"state_bytes"`
	PeakRSSBytes    int64 `json:"peak_rss_bytes"`
}

// PEFTInfo is the LoRA adapter of a training workload run with one (bench sft --use-peft).
type PEFTInfo struct {
	R             int      `json:"r"`
	Alpha         float64  `json:"lora_alpha"`
	TargetModules []string `json:"target_modules"`
	UseRSLoRA     bool     `json:"use_rslora"`
}

func peftInfo(c *lora.Config, a *lora.Adapter) *PEFTInfo {
	if c == nil || a == nil {
		return nil
	}
	return &PEFTInfo{R: c.R, Alpha: c.Alpha, TargetModules: a.Config.TargetModules, UseRSLoRA: c.UseRSLoRA}
}

// measureMemory reads m's trainable parameters and state bytes and the process's peak RSS.
func measureMemory(m *trainable.Model) (Memory, error) {
	vars, _, err := m.Trainable()
	if err != nil {
		return Memory{}, err
	}
	var out Memory
	for _, v := range vars {
		out.TrainableParams += v.Shape().Size()
	}
	for v := range m.Ctx.IterVariables() {
		out.StateBytes += int64(v.Shape().Memory())
	}
	out.PeakRSSBytes = peakRSS()
	return out, nil
}

// ResetPeakRSS restarts the kernel's peak-RSS count (Linux: clear_refs 5), so that the next
// workload's peak is its own; it reports whether it could.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS is VmHWM of /proc/self/status in bytes, or 0.
func peakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}
