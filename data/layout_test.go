package data

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data/chat"
)

// Files written by datasets 5.x / pyarrow in copies of the TRL quick starts' dataset shapes
// (scripts/reference/dataset_files.py): Parquet in the Hub's layout with README.md configs,
// split-named Parquet files, save_to_disk's Arrow files (a Dataset and a DatasetDict), JSONL, CSV
// and gzipped JSONL, tool-calling rows whose structs datasets unified (null keys) and a second
// config; with splits, slices and a '+' of splits. The rows read equal, field by field, the rows
// load_dataset returns for the same path, config and split (expected.json, read through the same
// row parser as JSONL).
func TestReadDatasets_EqualsLoadDataset(t *testing.T) {
	root := "testdata/datasets"
	b, err := os.ReadFile(filepath.Join(root, "expected.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Queries []struct {
			Path, Config, Split string
			Rows                []json.RawMessage
		}
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Queries) < 10 {
		t.Fatalf("%d queries", len(g.Queries))
	}
	for _, q := range g.Queries {
		t.Run(strings.ReplaceAll(q.Path+"/"+q.Config+"/"+q.Split, "/", "_"), func(t *testing.T) {
			got, err := ReadFileWith(filepath.Join(root, q.Path), ReadOptions{Split: q.Split, Config: q.Config})
			if err != nil {
				t.Fatal(err)
			}
			var jsonl []byte
			for _, r := range q.Rows {
				var c bytes.Buffer
				if err := json.Compact(&c, r); err != nil {
					t.Fatal(err)
				}
				jsonl = append(append(jsonl, c.Bytes()...), '\n')
			}
			want, err := Read(strings.NewReader(string(jsonl)), "expected", FormatAuto)
			if err != nil {
				t.Fatalf("load_dataset's rows: %v", err)
			}
			if got.Format != want.Format || len(got.Rows) != len(want.Rows) {
				t.Fatalf("%s, %d rows; load_dataset: %s, %d rows", got.Format, len(got.Rows), want.Format, len(want.Rows))
			}
			for i := range got.Rows {
				g, w := got.Rows[i], want.Rows[i]
				g.Line, w.Line = 0, 0
				if !reflect.DeepEqual(g, w) {
					t.Errorf("row %d:\n got %+v\nwant %+v", i+1, g, w)
				}
			}
		})
	}
}

func TestParseSplit(t *testing.T) {
	rows := make([]Row, 10)
	for i := range rows {
		rows[i].Line = i
	}
	for spec, want := range map[string][2]int{
		"train": {0, 10}, "train[:3]": {0, 3}, "train[7:]": {7, 10}, "train[-2:]": {8, 10}, "train[:-2]": {0, 8},
		"train[25%:]": {2, 10}, "train[:35%]": {0, 4}, "train[:25%]": {0, 2}, "train[:100]": {0, 10}, "train[5:2]": {0, 0},
	} {
		parts, err := parseSplit(spec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := parts[0].slice(rows, "d")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != want[1]-want[0] || (len(got) > 0 && got[0].Line != want[0]) {
			t.Errorf("%s: %d rows from %v, want [%d:%d]", spec, len(got), got, want[0], want[1])
		}
	}
	for _, bad := range []string{"train[", "train[a:b]", "tr ain", "train[1:2:3]", "[1:2]"} {
		if _, err := parseSplit(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// A row's tools column reaches the chat template as TRL's SFTTrainer passes it
// (apply_chat_template(messages, tools=example["tools"])): the tools rows of the Parquet file,
// rendered with Qwen2.5's template, equal transformers' rendering of the rows load_dataset returns
// (tools_rendered.json), the schemas' keys in the dataset's order and the structs datasets unified
// with null keys included.
func TestApplyChatTemplate_RowTools(t *testing.T) {
	d, err := ReadFileWith("testdata/datasets/tools", ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("testdata/datasets/tools_rendered.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Rendered []string }
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	std, err := ApplyChatTemplate(qwen25(t), d, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(std.Rows) != len(g.Rendered) || len(g.Rendered) == 0 {
		t.Fatalf("%d rows, %d renders", len(std.Rows), len(g.Rendered))
	}
	for i, r := range std.Rows {
		if r.Text.String != g.Rendered[i] {
			t.Errorf("row %d:\n got %q\nwant %q", i+1, r.Text.String, g.Rendered[i])
		}
	}
}
