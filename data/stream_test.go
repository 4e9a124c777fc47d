package data

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/parquet-go/parquet-go"
)

// streamRow is a row of the stream tests' prompt-completion dataset.
type streamRow struct {
	Prompt     string `parquet:"prompt" json:"prompt"`
	Completion string `parquet:"completion" json:"completion"`
	K          int64  `parquet:"k" json:"k"`
}

func streamRows(n int) []streamRow {
	rows := make([]streamRow, n)
	for i := range rows {
		rows[i] = streamRow{fmt.Sprintf("p%d", i), fmt.Sprintf("c%d", i), int64(i)}
	}
	return rows
}

// writeStreamFiles writes rows in every format a dataset file comes in, and as a directory of
// three JSONL shards, into dir; it returns their paths. The Parquet file has row groups of 7 rows,
// the Arrow stream record batches of 6.
func writeStreamFiles(t *testing.T, dir string, rows []streamRow) []string {
	t.Helper()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	jsonl := func(rows []streamRow) string {
		var b strings.Builder
		for i, r := range rows {
			j, _ := json.Marshal(r)
			b.Write(j)
			b.WriteString("\n")
			if i%5 == 2 {
				b.WriteString("\n") // blank lines are not rows
			}
		}
		return b.String()
	}
	indented, _ := json.MarshalIndent(rows, "", "  ")
	csv := "prompt,completion,k\n"
	for _, r := range rows {
		csv += fmt.Sprintf("%s,%s,%d\n", r.Prompt, r.Completion, r.K)
	}
	paths := []string{write("rows.jsonl", jsonl(rows)), write("rows.json", string(indented)), write("rows.csv", csv)}

	gz := filepath.Join(dir, "rows.csv.gz")
	f, err := os.Create(gz)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	zw.Write([]byte(csv))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	paths = append(paths, gz)

	pq := filepath.Join(dir, "rows.parquet")
	f, err = os.Create(pq)
	if err != nil {
		t.Fatal(err)
	}
	pw := parquet.NewGenericWriter[streamRow](f, parquet.MaxRowsPerRowGroup(7))
	if _, err := pw.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	paths = append(paths, pq)

	ar := filepath.Join(dir, "rows.arrow")
	f, err = os.Create(ar)
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "prompt", Type: arrow.BinaryTypes.String},
		{Name: "completion", Type: arrow.BinaryTypes.String}, {Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	aw := ipc.NewWriter(f, ipc.WithSchema(schema))
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	for lo := 0; lo < len(rows); lo += 6 {
		for _, r := range rows[lo:min(lo+6, len(rows))] {
			rb.Field(0).(*array.StringBuilder).Append(r.Prompt)
			rb.Field(1).(*array.StringBuilder).Append(r.Completion)
			rb.Field(2).(*array.Int64Builder).Append(r.K)
		}
		rec := rb.NewRecordBatch()
		if err := aw.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	if err := aw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	paths = append(paths, ar)

	shards := filepath.Join(dir, "shards")
	for i, cut := range [][2]int{{0, 13}, {13, 14}, {14, len(rows)}} {
		write(fmt.Sprintf("shards/train-%05d-of-00003.jsonl", i), jsonl(rows[cut[0]:cut[1]]))
	}
	return append(paths, shards)
}

// A slice that needs no row count (train[:N], train[A:B], train[A:]) reads its files only up to
// its end and parses only its rows, in every format and across a split's files: its rows equal,
// line numbers included, the whole split's rows sliced.
func TestRead_HeadSlicesEqualSlicedRows(t *testing.T) {
	rows := streamRows(40)
	for _, p := range writeStreamFiles(t, t.TempDir(), rows) {
		all, err := ReadFileWith(p, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.Rows) != len(rows) || all.Format != PromptCompletion {
			t.Fatalf("%s: %d %s rows, want %d prompt_completion", p, len(all.Rows), all.Format, len(rows))
		}
		for i, r := range all.Rows {
			if r.Prompt.String != rows[i].Prompt || r.Columns["k"] != float64(i) {
				t.Fatalf("%s: row %d: %+v", p, i+1, r)
			}
			line := i + 1 // Parquet and Arrow: the row's number; CSV: its line past the header
			switch filepath.Ext(p) {
			case ".jsonl":
				line += (i + 2) / 5 // the blank lines before it
			case ".json":
				line = 2 + 5*i // "[", then five lines an object
			case ".csv", ".gz":
				line = i + 2
			}
			if filepath.Base(p) != "shards" && r.Line != line {
				t.Errorf("%s: row %d is named line %d, want %d", p, i+1, r.Line, line)
			}
		}
		for _, c := range []struct {
			split    string
			from, to int
		}{{"train[:3]", 0, 3}, {"train[2:5]", 2, 5}, {"train[33:]", 33, 40}, {"train[6:15]", 6, 15},
			{"train[13:14]", 13, 14}, {"train[:1000]", 0, 40}, {"train[12:20]+train[:2]", 12, 20},
			{"train[-5:]", 35, 40}, {"train[:10%]", 0, 4}, {"train[-12:-3]", 28, 37}, {"train[25%:75%]", 10, 30}} {
			got, err := ReadFileWith(p, ReadOptions{Split: c.split})
			if err != nil {
				t.Fatalf("%s %s: %v", p, c.split, err)
			}
			want := all.Rows[c.from:c.to]
			if strings.Contains(c.split, "+") {
				want = append(append([]Row{}, want...), all.Rows[:2]...)
			}
			if !reflect.DeepEqual(got.Rows, want) || got.Format != all.Format {
				t.Errorf("%s %s: %d rows (first %+v), want rows %d to %d", p, c.split, len(got.Rows), got.Rows[0], c.from+1, c.to)
			}
		}
		if _, err := ReadFileWith(p, ReadOptions{Split: "train[5:5]"}); err == nil || !strings.Contains(err.Error(), "no rows") {
			t.Errorf("%s: an empty slice: %v", p, err)
		}
	}
}

// A head slice stops reading at its end: what follows it in the file is not read (a malformed tail
// does not stop train[:10], and does stop train[:11]), and reading the first rows of a 32 MB file
// allocates a small part of it. So does a slice from the end or by percentage of a JSON Lines or
// Parquet split, whose rows are counted first (lines; the files' footers).
func TestRead_HeadSliceStopsReading(t *testing.T) {
	dir := t.TempDir()
	var good strings.Builder
	for _, r := range streamRows(10) {
		j, _ := json.Marshal(r)
		good.Write(j)
		good.WriteString("\n")
	}
	for name, text := range map[string]string{"tail.jsonl": good.String() + "{not json\n",
		"tail.json": "[" + strings.ReplaceAll(strings.TrimSpace(good.String()), "\n", ",\n") + ",\n{not json"} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if d, err := ReadFileWith(p, ReadOptions{Split: "train[:10]"}); err != nil || len(d.Rows) != 10 {
			t.Errorf("%s train[:10]: %v", name, err)
		}
		if _, err := ReadFileWith(p, ReadOptions{Split: "train[:11]"}); err == nil || !strings.Contains(err.Error(), p+":11: invalid JSON") {
			t.Errorf("%s train[:11]: %v, want the error of line 11", name, err)
		}
	}

	big := filepath.Join(dir, "big.jsonl")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	pad := strings.Repeat("x", 16<<10)
	for i := range 2048 {
		fmt.Fprintf(f, `{"prompt": "p%d %s", "completion": "c"}`+"\n", i, pad)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err := ReadFileWith(big, ReadOptions{Split: "train[:8]"})
	runtime.ReadMemStats(&after)
	if err != nil || len(d.Rows) != 8 {
		t.Fatalf("%v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("train[:8] of a 32 MB file allocated %.1f MB", float64(alloc)/(1<<20))
	}
	// A slice from the end: the rows are counted (lines, unparsed), then the window read.
	runtime.GC()
	runtime.ReadMemStats(&before)
	d, err = ReadFileWith(big, ReadOptions{Split: "train[-8:]"})
	runtime.ReadMemStats(&after)
	if err != nil || len(d.Rows) != 8 || d.Rows[7].Line != 2048 {
		t.Fatalf("train[-8:]: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("train[-8:] of a 32 MB file allocated %.1f MB", float64(alloc)/(1<<20))
	}

	// Parquet's footer gives the row count, so a slice from the end or by percentage is read on
	// demand too.
	pq := filepath.Join(dir, "big.parquet")
	f, err = os.Create(pq)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]streamRow, 2048)
	for i := range rows {
		rows[i] = streamRow{fmt.Sprintf("p%d %s", i, pad), "c", int64(i)}
	}
	pw := parquet.NewGenericWriter[streamRow](f, parquet.MaxRowsPerRowGroup(64), parquet.Compression(&parquet.Uncompressed))
	if _, err := pw.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	allocs := map[string]float64{}
	for _, split := range []string{"train", "train[-8:]", "train[99%:]"} {
		runtime.GC()
		runtime.ReadMemStats(&before)
		d, err := ReadFileWith(pq, ReadOptions{Split: split})
		runtime.ReadMemStats(&after)
		if err != nil || len(d.Rows) == 0 || d.Rows[len(d.Rows)-1].Columns["k"] != 2047.0 {
			t.Fatalf("%s: %v", split, err)
		}
		allocs[split] = float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
	}
	t.Logf("allocated reading the 32 MB Parquet file: %v MB", allocs)
	for _, split := range []string{"train[-8:]", "train[99%:]"} {
		if allocs[split] > allocs["train"]/10 {
			t.Errorf("%s allocated %.1f MB, the whole file %.1f MB", split, allocs[split], allocs["train"])
		}
	}
}
