package answer_test

import (
	"path/filepath"
	"reflect"
	"testing"

	"github.com/posttrain/posttrain/apps/answer"
	"github.com/posttrain/posttrain/data/chat"
	"github.com/posttrain/posttrain/data/mult"
	"github.com/posttrain/posttrain/models/tinymodel"
	"github.com/posttrain/posttrain/trainers/engine/loop/looptest"
)

// Greedy answers do not depend on how the prompts are batched (left padding, batch buckets), and
// there is one answer per prompt, in order; a different prompt set gives different answers.
func TestGreedy_BatchInvariant(t *testing.T) {
	// A sharp random model (weights ~ N(0, 1)), so greedy answers differ between prompts.
	dir := filepath.Join(t.TempDir(), "model")
	if err := tinymodel.Write(dir, tinymodel.Options{InitRange: 1}); err != nil {
		t.Fatal(err)
	}
	b := looptest.Backend(t)
	var prompts [][]chat.Message
	for _, p := range mult.Problems(5, 3) {
		prompts = append(prompts, []chat.Message{{Role: "user", Content: p.Prompt()}})
	}
	all, err := answer.Greedy(b, dir, prompts, 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(prompts) {
		t.Fatalf("%d answers for %d prompts", len(all), len(prompts))
	}
	if distinct := map[string]bool{all[0]: true, all[1]: true, all[2]: true, all[3]: true, all[4]: true}; len(distinct) < 2 {
		t.Fatalf("answers %q do not depend on the prompt: the test would not see a mix-up", all)
	}
	for _, batch := range []int{1, 2} {
		got, err := answer.Greedy(b, dir, prompts, 6, batch)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, all) {
			t.Errorf("batch %d: %q, want the unbatched answers %q", batch, got, all)
		}
	}
	one, err := answer.Greedy(b, dir, prompts[2:3], 6, 0)
	if err != nil {
		t.Fatal(err)
	}
	if one[0] != all[2] {
		t.Errorf("prompt 2 alone: %q, in the batch: %q", one[0], all[2])
	}
}

func TestGreedy_MissingModel(t *testing.T) {
	if _, err := answer.Greedy(looptest.Backend(t), t.TempDir(), nil, 4, 0); err == nil {
		t.Fatal("want an error for a directory without a checkpoint")
	}
}
