package mult

import (
	"fmt"

	"github.com/posttrain/posttrain/data"
)

// SourceName is the --dataset value that generates the course's multiplication problems instead
// of reading a file.
const SourceName = "mult"

// SourceRows and SourceSeed size the generated dataset: the course's make_dataset(512, 0) /
// make_pairs(512, 0).
const (
	SourceRows = 512
	SourceSeed = 0
)

func init() { data.RegisterSource(SourceName, Source) }

// sourceKinds maps the format a trainer wants to the kind of rows that serve it.
var sourceKinds = map[data.Format]Kind{data.PromptOnly: GRPO, data.PromptCompletion: SFT, data.Preference: DPO, data.Unpaired: KTO}

// Source is the registered dataset "mult": SourceRows problems drawn with SourceSeed, as the rows
// of the kind whose format is wanted (prompt-only with an "answer" column for GRPO,
// prompt-completion for SFT, preference pairs for DPO, unpaired rows for KTO).
func Source(want data.Format) (*data.Dataset, error) {
	kind, ok := sourceKinds[want]
	if !ok {
		return nil, fmt.Errorf("generates prompt_only, prompt_completion, preference or unpaired rows, not %s", want)
	}
	format, rows, err := Rows(kind, SourceRows, SourceSeed)
	if err != nil {
		return nil, err
	}
	return &data.Dataset{Path: SourceName, Format: format, Conversational: true, Rows: rows}, nil
}
