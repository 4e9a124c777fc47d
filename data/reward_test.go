package data

import (
	"strings"
	"testing"
)

func TestRewardRegistry(t *testing.T) {
	RegisterReward("test_len", func(_, completions []string, _ map[string][]any) ([]float64, error) {
		out := make([]float64, len(completions))
		for i, c := range completions {
			out[i] = float64(len(c))
		}
		return out, nil
	})
	f, err := LookupReward("test_len")
	if err != nil {
		t.Fatal(err)
	}
	got, err := f(nil, []string{"ab", ""}, nil)
	if err != nil || len(got) != 2 || got[0] != 2 || got[1] != 0 {
		t.Errorf("test_len = %v, %v", got, err)
	}
	if _, err := LookupReward("nope"); err == nil || !strings.Contains(err.Error(), "test_len") {
		t.Errorf("unknown name: got %v, want an error listing the registered names", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("duplicate registration: want a panic")
		}
	}()
	RegisterReward("test_len", f)
}
