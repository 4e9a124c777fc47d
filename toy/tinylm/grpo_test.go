package tinylm

import (
	"testing"

	"github.com/posttrain/posttrain/internal/pyrand"
)

// DAPO's dynamic sampling drops a group whose rewards are all equal after sampling it: with seed 0
// the first 8 answers to 3×4= are all wrong, so only 2×3='s group is kept, yet the random stream
// is where GRPO's is.
func TestSampleGroups_DAPODropsAfterSampling(t *testing.T) {
	dapo, _ := VariantByName("DAPO")
	run := func(v GRPOVariant) ([][]GroupSample, int, float64) {
		cfg := DefaultGRPO()
		cfg.Variant = v
		rng := pyrand.New(0)
		seen := 0
		groups := SampleGroups(New(), rng, cfg, func(string, []int) { seen++ })
		return groups, seen, rng.Random()
	}
	gGRPO, nGRPO, nextGRPO := run(DefaultVariant)
	gDAPO, nDAPO, nextDAPO := run(dapo)
	if len(gGRPO) != 2 || len(gDAPO) != 1 || gDAPO[0][0].Prompt != "2×3=" {
		t.Fatalf("GRPO kept %d groups, DAPO %d (want 2 and 1, 2×3=)", len(gGRPO), len(gDAPO))
	}
	if nGRPO != 16 || nDAPO != 16 || nextGRPO != nextDAPO {
		t.Errorf("samples seen %d/%d, next random %v/%v: want 16 each and the same stream",
			nGRPO, nDAPO, nextGRPO, nextDAPO)
	}
	for _, s := range gGRPO[0] {
		if s.Adv != 0 {
			t.Errorf("all-wrong group: advantage %v, want 0", s.Adv)
		}
	}
}

// The variants are the course's VARIANTS: DEFAULT with the listed changes.
func TestVariants_AreTheCourses(t *testing.T) {
	want := []string{"GRPO", "RLOO", "Dr. GRPO", "DAPO", "GSPO"}
	for i, v := range Variants {
		if v.Name != want[i] {
			t.Errorf("variant %d = %s, want %s", i, v.Name, want[i])
		}
		if err := v.Cfg.Validate(); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
	}
	if d, _ := VariantByName("DAPO"); d.EpsHigh != 0.28 || !d.Dynamic || d.Agg != AggTokenMean || d.Beta != 0 {
		t.Errorf("DAPO = %+v", d)
	}
	if _, ok := VariantByName("PPO"); ok {
		t.Error("VariantByName(PPO) found a variant")
	}
}
