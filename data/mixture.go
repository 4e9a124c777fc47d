package data

import (
	"fmt"
	"slices"
	"strings"
)

// MixtureEntry is one dataset of TRL's dataset mixture (trl.scripts.DatasetConfig, a config's
// `datasets:` list): load_dataset(path, name=name, split=split), its columns selected.
type MixtureEntry struct {
	Path    string   `yaml:"path"`
	Name    string   `yaml:"name,omitempty"`
	Split   string   `yaml:"split,omitempty"` // "" = train
	Columns []string `yaml:"columns,omitempty"`
}

// ReadMixture reads each entry of a mixture (ReadFileWith with its split and config) and
// concatenates their rows, as TRL's get_dataset concatenates the datasets (concatenate_datasets):
// every entry must hold rows of one format. An entry's columns keep only those of the row's other
// columns, and must name the format's own (TRL: select_columns).
func ReadMixture(entries []MixtureEntry, o ReadOptions) (*Dataset, error) {
	o.Stream = false // a mixture's rows are kept: its entries are filtered and joined
	var out *Dataset
	for i, e := range entries {
		if e.Path == "" {
			return nil, fmt.Errorf("datasets[%d]: no path", i)
		}
		eo := o
		eo.Split, eo.Config = e.Split, e.Name
		if eo.Split == "" {
			eo.Split = "train"
		}
		d, err := ReadFileWith(e.Path, eo)
		if err != nil {
			return nil, fmt.Errorf("datasets[%d]: %w", i, err)
		}
		if e.Columns != nil {
			var need [][]string // each: one of these columns
			switch d.Format {
			case LanguageModeling:
				need = [][]string{{d.TextField, "messages"}}
			case Preference:
				need = [][]string{{"chosen"}, {"rejected"}}
			default:
				for _, k := range d.Format.keys() {
					need = append(need, []string{k})
				}
			}
			for _, oneOf := range need {
				if !slices.ContainsFunc(oneOf, func(k string) bool { return slices.Contains(e.Columns, k) }) {
					return nil, fmt.Errorf("datasets[%d] %s: columns %s leave out %q, which %s rows need", i, e.Path, strings.Join(e.Columns, ", "), oneOf[0], d.Format)
				}
			}
			for j := range d.Rows {
				kept := map[string]any{}
				for k, v := range d.Rows[j].Columns {
					if slices.Contains(e.Columns, k) {
						kept[k] = v
					}
				}
				d.Rows[j].Columns = kept
				if !slices.Contains(e.Columns, "tools") {
					d.Rows[j].Tools = nil
				}
			}
		}
		if out == nil {
			out = d
			if o.Format == FormatAuto {
				o.Format = d.Format
			}
			continue
		}
		if d.Format != out.Format || d.Conversational != out.Conversational {
			return nil, fmt.Errorf("datasets[%d] %s holds %s rows, datasets[0] %s", i, e.Path, d.Format, out.Format)
		}
		out.Rows = append(out.Rows, d.Rows...)
	}
	if out == nil {
		return nil, fmt.Errorf("datasets: an empty mixture")
	}
	return out, nil
}
