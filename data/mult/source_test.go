package mult

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/posttrain/posttrain/data"
)

// --dataset mult is the registered source: the rows Rows makes for the kind whose format the
// trainer asks for, SourceRows of them drawn with SourceSeed.
func TestSourceServesEachTrainersFormat(t *testing.T) {
	for format, kind := range map[data.Format]Kind{data.PromptOnly: GRPO, data.PromptCompletion: SFT, data.Preference: DPO, data.Unpaired: KTO} {
		d, err := data.Open(SourceName, format)
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		wantFormat, want, err := Rows(kind, SourceRows, SourceSeed)
		if err != nil {
			t.Fatal(err)
		}
		if d.Format != wantFormat || d.Format != format || !reflect.DeepEqual(d.Rows, want) || !d.Conversational {
			t.Errorf("%s: format %s, %d rows, conversational %v; want %s, %d rows of kind %s", format, d.Format, len(d.Rows), d.Conversational, format, len(want), kind)
		}
	}
	if _, err := data.Open(SourceName, data.LanguageModeling); err == nil || !strings.Contains(err.Error(), "dataset mult:") {
		t.Errorf("language-modelling rows from mult: want an error naming the dataset, got %v", err)
	}
	if !strings.Contains(strings.Join(data.SourceNames(), ","), SourceName) {
		t.Errorf("sources %v lack %s", data.SourceNames(), SourceName)
	}
}

// A name that is no registered source is a file, read as before.
func TestOpenReadsFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "p.jsonl")
	if err := os.WriteFile(path, []byte(`{"prompt": "hi"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := data.Open(path, data.PromptOnly)
	if err != nil || d.Format != data.PromptOnly || len(d.Rows) != 1 {
		t.Fatalf("Open(file) = %+v, %v", d, err)
	}
	if _, err := data.Open(filepath.Join(t.TempDir(), "missing.jsonl"), data.PromptOnly); err == nil {
		t.Error("a missing file is no error")
	}
}

func TestRegisterSourceRefusesDuplicatesAndPaths(t *testing.T) {
	for _, name := range []string{SourceName, "a/b", "x.jsonl", ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterSource(%q) did not panic", name)
				}
			}()
			data.RegisterSource(name, Source)
		}()
	}
}
