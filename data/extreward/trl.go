package extreward

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/posttrain/posttrain/data/chat"
)

// Builtin makes a reward function of TRL's arguments implemented in Go.
func Builtin(name string, score func(Call) ([]float64, error)) *Func {
	return &Func{Name: name, Spec: name, score: score}
}

// trlRewards are TRL 0.24's trl.rewards under the names its grpo.py script registers them by
// (reward_funcs_registry), in Go.
var trlRewards = map[string]func(Call) ([]float64, error){
	"accuracy_reward":              accuracyReward,
	"think_format_reward":          thinkFormatReward,
	"get_soft_overlong_punishment": softOverlongPunishment(1280, 256), // grpo.py's values
}

// TRLReward returns the TRL reward function registered under name, or nil.
func TRLReward(name string) *Func {
	f := trlRewards[name]
	if f == nil {
		return nil
	}
	b := Builtin(name, f)
	b.Undecidable = name == "accuracy_reward"
	return b
}

// TRLRewardNames lists the TRL reward functions built in, sorted.
func TRLRewardNames() []string {
	names := make([]string, 0, len(trlRewards))
	for n := range trlRewards {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// content is a completion's text: the string, or its (one) message's content.
func content(c any) (string, error) {
	switch c := c.(type) {
	case string:
		return c, nil
	case []chat.Message:
		if len(c) > 0 {
			return c[0].Content, nil
		}
	}
	return "", fmt.Errorf("a completion of type %T", c)
}

// thinkFormatReward is trl.rewards.think_format_reward: 1 when the completion matches
// ^<think>(?!.*<think>)(.*?)</think>.*$ (re.DOTALL | re.MULTILINE, re.match), else 0: it opens
// with <think>, opens no other, and closes one.
func thinkFormatReward(c Call) ([]float64, error) {
	out := make([]float64, len(c.Completions))
	for i, comp := range c.Completions {
		s, err := content(comp)
		if err != nil {
			return nil, err
		}
		rest, ok := strings.CutPrefix(s, "<think>")
		if ok && !strings.Contains(rest, "<think>") && strings.Contains(rest, "</think>") {
			out[i] = 1
		}
	}
	return out, nil
}

// softOverlongPunishment is trl.rewards.get_soft_overlong_punishment(max, cache), DAPO's Eq. 13
// over the completion's token count |y|: 0 up to max−cache, then (max−cache−|y|)/cache down to
// −1 at max, −1 beyond.
func softOverlongPunishment(maxLen, cache int) func(Call) ([]float64, error) {
	return func(c Call) ([]float64, error) {
		out := make([]float64, len(c.CompletionIDs))
		for i, ids := range c.CompletionIDs {
			n := len(ids)
			switch {
			case n <= maxLen-cache:
				out[i] = 0
			case n <= maxLen:
				out[i] = float64(maxLen-cache-n) / float64(cache)
			default:
				out[i] = -1
			}
		}
		return out, nil
	}
}

// PatternReward is a reward named by its spec, posttrain's own: "regex:PATTERN" is 1 when the
// completion's text matches PATTERN (Go's RE2 syntax, anywhere in the text: anchor with ^ and $),
// else 0; "len:N" is −|N − the completion's length in characters| (TRL's quick-start reward_len
// with its target). name is what the reward logs under. nil, nil for any other spec.
func PatternReward(spec, name string) (*Func, error) {
	var score func(text string) float64
	switch kind, arg, _ := strings.Cut(spec, ":"); kind {
	case "regex":
		re, err := regexp.Compile(arg)
		if err != nil {
			return nil, fmt.Errorf("reward_funcs %s: %w", spec, err)
		}
		score = func(s string) float64 {
			if re.MatchString(s) {
				return 1
			}
			return 0
		}
	case "len":
		n, err := strconv.Atoi(arg)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("reward_funcs %s: want len:N with N a length in characters ≥ 0", spec)
		}
		score = func(s string) float64 { return -math.Abs(float64(n - utf8.RuneCountInString(s))) }
	default:
		return nil, nil
	}
	return &Func{Name: name, Spec: spec, score: func(c Call) ([]float64, error) {
		out := make([]float64, len(c.Completions))
		for i, comp := range c.Completions {
			s, err := content(comp)
			if err != nil {
				return nil, err
			}
			out[i] = score(s)
		}
		return out, nil
	}}, nil
}
