package main

import (
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/models/lora"
	"github.com/posttrain/posttrain/models/safetensors"
	"github.com/posttrain/posttrain/models/tinymodel"
)

// `posttrain merge` of each adapter of models/testdata/peft-0.21.2 (four that PEFT 0.21.2 saved,
// one that `posttrain sft --use-peft` wrote) gives PEFT's merge_and_unload() of the same files
// (expected/merged.safetensors, scripts/reference/peft_adapters.py): every tensor the merge changed
// within 4 float32 units in the last place of max(|W|, |W'|, s·Σ_k |B[o,k]·A[k,i]|) (PEFT sums
// the r products of B·A in float32, scales and adds in float32: its rounding is relative to the
// terms it sums, which cancel; posttrain sums in float64 and rounds once), the modules_to_save
// tensors bit for bit (the trained copy), every other tensor equal to the base's bit for bit, and no
// tensor missing or extra.
func TestMerge_EqualsPEFTMergeAndUnload(t *testing.T) {
	goldens, err := filepath.Glob("../../models/testdata/peft-0.21.2/*/expected/merged.safetensors")
	if err != nil || len(goldens) != 5 {
		t.Fatalf("merged.safetensors goldens: %v %v, want 5", goldens, err)
	}
	const ulps = 4
	for _, golden := range goldens {
		caseDir := filepath.Dir(filepath.Dir(golden))
		t.Run(filepath.Base(caseDir), func(t *testing.T) {
			want, meta, err := safetensors.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			// the base with a tokenizer (merge writes one; the fixtures have none): its files and
			// tinymodel's tokenizer files, which the merge copies and does not read
			base := filepath.Join(t.TempDir(), "base")
			if err := os.CopyFS(base, os.DirFS(filepath.Join("../..", meta["base"]))); err != nil {
				t.Fatal(err)
			}
			if err := tinymodel.WriteTokenizer(base); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "merged")
			if _, err := runCLI(t, "merge", "--model", base, "--adapter", filepath.Join(caseDir, "adapter"), "--output-dir", out); err != nil {
				t.Fatal(err)
			}
			cfg, err := lora.ReadConfig(filepath.Join(caseDir, "adapter"))
			if err != nil {
				t.Fatal(err)
			}
			adapter, err := lora.ReadWeights(filepath.Join(caseDir, "adapter"))
			if err != nil {
				t.Fatal(err)
			}
			got, err := safetensors.ReadModelDir(out)
			if err != nil {
				t.Fatal(err)
			}
			orig, err := safetensors.ReadModelDir(base)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(orig) {
				t.Errorf("merged checkpoint has %d tensors, the base %d", len(got), len(orig))
			}
			names := make([]string, 0, len(orig))
			for n := range orig {
				names = append(names, n)
			}
			sort.Strings(names)
			worst, changed := 0.0, 0
			for _, name := range names {
				g, o := float32sOf(t, got, name), float32sOf(t, orig, name)
				if len(g) != len(o) {
					t.Fatalf("%s: %d values, the base's %d", name, len(g), len(o))
				}
				if want[name] == nil {
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(o[i]) {
							t.Fatalf("%s[%d] = %g, the base's %g: merge_and_unload leaves this tensor as it is", name, i, g[i], o[i])
						}
					}
					continue
				}
				changed++
				w := float32sOf(t, want, name)
				cond := make([]float64, len(w)) // s·Σ_k |B[o,k]|·|A[k,i]|: the size of the terms PEFT's float32 product sums
				if a := adapter[lora.NamePrefix+strings.TrimSuffix(name, ".weight")+".lora_A.weight"]; a != nil {
					av, bv := float32sOf(t, adapter, lora.NamePrefix+strings.TrimSuffix(name, ".weight")+".lora_A.weight"), float32sOf(t, adapter, lora.NamePrefix+strings.TrimSuffix(name, ".weight")+".lora_B.weight")
					r, in := a.Shape[0], a.Shape[1]
					for i := range cond {
						for k := range r {
							cond[i] += cfg.Scaling() * math.Abs(float64(bv[(i/in)*r+k])*float64(av[k*in+i%in]))
						}
					}
				} else {
					for i := range g {
						if math.Float32bits(g[i]) != math.Float32bits(w[i]) {
							t.Fatalf("%s[%d] = %g, PEFT's %g: a modules_to_save tensor is its trained copy, bit for bit", name, i, g[i], w[i])
						}
					}
				}
				for i := range g {
					scale := max(math.Abs(float64(w[i])), math.Abs(float64(o[i])), cond[i])
					ulp := math.Ldexp(1, math.Ilogb(scale)-23)
					worst = max(worst, math.Abs(float64(g[i])-float64(w[i]))/ulp)
				}
			}
			if changed != len(want) {
				t.Errorf("%d of PEFT's %d merged tensors are in the base", changed, len(want))
			}
			t.Logf("%d tensors merged; the largest difference from merge_and_unload is %.2f float32 ulps", changed, worst)
			if !(worst <= ulps) {
				t.Errorf("posttrain merge differs from merge_and_unload by %.2f ulps > %d", worst, ulps)
			}
		})
	}
}

func float32sOf(t *testing.T, ts map[string]*safetensors.Tensor, name string) []float32 {
	t.Helper()
	x := ts[name]
	if x == nil {
		t.Fatalf("no tensor %s", name)
	}
	f, err := x.Float32s()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}
