package data

import (
	"fmt"

	"github.com/posttrain/posttrain/data/chat"
)

// extractPrompt splits an implicit-prompt preference row as TRL's extract_prompt
// (trl/data_utils.py) does: the prompt is the longest common prefix of chosen and rejected
// (characters for strings, whole messages for conversations), a space just before the first difference moves to
// the answers, and when one is a prefix of the other the loop's last index is used, as in TRL.
func extractPrompt(row *Row) error {
	if row.Chosen.Conversational() {
		c, r := row.Chosen.Messages, row.Rejected.Messages
		idx, _, err := commonPrefix(len(c), len(r), func(i int) bool { return chat.Equal(c[i], r[i]) })
		if err != nil {
			return err
		}
		if idx == 0 {
			return fmt.Errorf("implicit prompt: chosen and rejected share no leading message (add a \"prompt\")")
		}
		row.Prompt = Text{Messages: c[:idx:idx]}
		row.Chosen.Messages, row.Rejected.Messages = c[idx:], r[idx:]
		return nil
	}
	c, r := []rune(row.Chosen.String), []rune(row.Rejected.String)
	idx, broke, err := commonPrefix(len(c), len(r), func(i int) bool { return c[i] == r[i] })
	if err != nil {
		return err
	}
	if broke && idx > 0 && c[idx-1] == ' ' {
		idx--
	}
	row.Prompt = Text{String: string(c[:idx])}
	row.Chosen.String, row.Rejected.String = string(c[idx:]), string(r[idx:])
	return nil
}

// commonPrefix returns the first index where same fails (broke), or n-1 when none does (TRL's
// loop variable after a loop that did not break).
func commonPrefix(nc, nr int, same func(i int) bool) (idx int, broke bool, err error) {
	n := min(nc, nr)
	if n == 0 {
		return 0, false, fmt.Errorf("implicit prompt: chosen or rejected is empty")
	}
	for i := 0; i < n; i++ {
		if !same(i) {
			return i, true, nil
		}
	}
	return n - 1, false, nil
}
