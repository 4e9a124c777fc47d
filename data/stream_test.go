package data

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

// jsonlText is rows as JSON Lines, with a blank line (not a row) after every fifth row from the
// third on.
func jsonlText(rows []streamRow) string {
	var b strings.Builder
	for i, r := range rows {
		j, _ := json.Marshal(r)
		b.Write(j)
		b.WriteString("\n")
		if i%5 == 2 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// writeWith creates the file path (and its directory) and writes it with write.
func writeWith(t *testing.T, path string, write func(w io.Writer) error) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(write(f), f.Close()); err != nil {
		t.Fatal(err)
	}
	return path
}

// writeText writes text into the file path.
func writeText(t *testing.T, path, text string) string {
	return writeWith(t, path, func(w io.Writer) error { _, err := io.WriteString(w, text); return err })
}

// writeParquet writes rows as a Parquet file with row groups of perGroup rows.
func writeParquet(t *testing.T, path string, rows []streamRow, perGroup int64) string {
	return writeWith(t, path, func(w io.Writer) error {
		pw := parquet.NewGenericWriter[streamRow](w, parquet.MaxRowsPerRowGroup(perGroup), parquet.Compression(&parquet.Uncompressed))
		if _, err := pw.Write(rows); err != nil {
			return err
		}
		return pw.Close()
	})
}

// writeStreamFiles writes rows in every format a dataset file comes in, and as a directory of
// three JSONL shards, into dir; it returns their paths. The Parquet file has row groups of 7 rows,
// the Arrow stream record batches of 6.
// writeArrow writes rows as an Arrow IPC stream (save_to_disk's format), perBatch rows a record
// batch.
func writeArrow(t *testing.T, path string, rows []streamRow, perBatch int) string {
	return writeWith(t, path, func(w io.Writer) error {
		schema := arrow.NewSchema([]arrow.Field{{Name: "prompt", Type: arrow.BinaryTypes.String},
			{Name: "completion", Type: arrow.BinaryTypes.String}, {Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
		aw := ipc.NewWriter(w, ipc.WithSchema(schema))
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for lo := 0; lo < len(rows); lo += perBatch {
			for _, r := range rows[lo:min(lo+perBatch, len(rows))] {
				rb.Field(0).(*array.StringBuilder).Append(r.Prompt)
				rb.Field(1).(*array.StringBuilder).Append(r.Completion)
				rb.Field(2).(*array.Int64Builder).Append(r.K)
			}
			rec := rb.NewRecordBatch()
			err := aw.Write(rec)
			rec.Release()
			if err != nil {
				return err
			}
		}
		return aw.Close()
	})
}

// csvText is rows as CSV with a header.
func csvText(rows []streamRow) string {
	var b strings.Builder
	b.WriteString("prompt,completion,k\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%s,%s,%d\n", r.Prompt, r.Completion, r.K)
	}
	return b.String()
}

// bigRows are the memory tests' 2,048 rows of 16 KB (32 MB as JSON Lines), k numbering them.
func bigRows() []streamRow {
	pad := strings.Repeat("x", 16<<10)
	rows := make([]streamRow, 2048)
	for i := range rows {
		rows[i] = streamRow{fmt.Sprintf("p%d %s", i, pad), "c", int64(i)}
	}
	return rows
}

func writeStreamFiles(t *testing.T, dir string, rows []streamRow) []string {
	t.Helper()
	indented, _ := json.MarshalIndent(rows, "", "  ")
	csv := csvText(rows)
	paths := []string{
		writeText(t, filepath.Join(dir, "rows.jsonl"), jsonlText(rows)),
		writeText(t, filepath.Join(dir, "rows.json"), string(indented)),
		writeText(t, filepath.Join(dir, "rows.csv"), csv),
		writeWith(t, filepath.Join(dir, "rows.csv.gz"), func(w io.Writer) error {
			zw := gzip.NewWriter(w)
			_, err := io.WriteString(zw, csv)
			return errors.Join(err, zw.Close())
		}),
		writeParquet(t, filepath.Join(dir, "rows.parquet"), rows, 7),
		writeArrow(t, filepath.Join(dir, "rows.arrow"), rows, 6),
	}
	shards := filepath.Join(dir, "shards")
	for i, cut := range [][2]int{{0, 13}, {13, 14}, {14, len(rows)}} {
		writeText(t, filepath.Join(shards, fmt.Sprintf("train-%05d-of-00003.jsonl", i)), jsonlText(rows[cut[0]:cut[1]]))
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
// does not stop train[:10], and does stop train[:11]). Reading a slice of a 32 MB file allocates
// a tenth of what reading it whole does at most, from its start, and from its end or by
// percentage where the rows are counted first (JSON Lines' lines, Parquet's footer).
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

	// Slices of 32 MB files (2,048 rows of 16 KB): from the start, from the end and by
	// percentage, JSON Lines (rows counted as lines, unparsed) and Parquet (counted by its footer).
	rows := bigRows()
	for _, p := range []string{writeText(t, filepath.Join(dir, "big.jsonl"), jsonlText(rows)), writeParquet(t, filepath.Join(dir, "big.parquet"), rows, 64)} {
		allocs := map[string]float64{}
		for _, c := range []struct {
			split    string
			from, to int
		}{{"train", 0, 2048}, {"train[:8]", 0, 8}, {"train[-8:]", 2040, 2048}, {"train[99%:]", 2028, 2048}} {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			d, err := ReadFileWith(p, ReadOptions{Split: c.split})
			runtime.ReadMemStats(&after)
			if err != nil || len(d.Rows) != c.to-c.from || d.Rows[0].Columns["k"] != float64(c.from) {
				t.Fatalf("%s %s: %v", p, c.split, err)
			}
			allocs[c.split] = float64(after.TotalAlloc-before.TotalAlloc) / (1 << 20)
		}
		t.Logf("%s: MB allocated %v", filepath.Base(p), allocs)
		for split, mb := range allocs {
			if split != "train" && mb > allocs["train"]/10 {
				t.Errorf("%s %s allocated %.1f MB, the whole file %.1f MB", filepath.Base(p), split, mb, allocs["train"])
			}
		}
	}
}

// A slice from the end or by percentage of a JSON array, a CSV file or an Arrow file counts the
// rows first (none kept) and then keeps only its own: what the read leaves in memory is a tenth
// of what the whole split leaves at most (sliced after a whole read, the slice would hold the
// whole split's rows alive).
func TestRead_CountedSlicesKeepOnlyTheirRows(t *testing.T) {
	dir := t.TempDir()
	rows := bigRows()
	indented, _ := json.MarshalIndent(rows, "", "  ")
	for _, p := range []string{writeText(t, filepath.Join(dir, "big.json"), string(indented)),
		writeText(t, filepath.Join(dir, "big.csv"), csvText(rows)), writeArrow(t, filepath.Join(dir, "big.arrow"), rows, 64)} {
		kept := map[string]float64{}
		for _, c := range []struct {
			split    string
			from, to int
		}{{"train", 0, 2048}, {"train[-8:]", 2040, 2048}, {"train[99%:]", 2028, 2048}} {
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			d, err := ReadFileWith(p, ReadOptions{Split: c.split})
			runtime.GC()
			runtime.ReadMemStats(&after)
			if err != nil || len(d.Rows) != c.to-c.from || d.Rows[0].Columns["k"] != float64(c.from) {
				t.Fatalf("%s %s: %v", p, c.split, err)
			}
			kept[c.split] = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / (1 << 20)
			runtime.KeepAlive(d)
		}
		t.Logf("%s: MB kept %v", filepath.Base(p), kept)
		for split, mb := range kept {
			if split != "train" && mb > kept["train"]/10 {
				t.Errorf("%s %s keeps %.1f MB, the whole split %.1f MB", filepath.Base(p), split, mb, kept["train"])
			}
		}
	}
}

// A streamed read (ReadOptions.Stream) keeps no rows, and its Each hands over, one at a time,
// exactly the rows a read that keeps them gives — line numbers included — in every format, for
// slices too; a malformed row stops the first reading with the error a kept read gives, also in
// a slice from the end, whose rows cannot be counted first then.
func TestRead_StreamedEqualsKept(t *testing.T) {
	rows := streamRows(40)
	dir := t.TempDir()
	files := writeStreamFiles(t, dir, rows)
	for _, p := range files {
		for _, split := range []string{"", "train[:3]", "train[33:]", "train[-5:]", "train[25%:75%]", "train[12:20]+train[:2]"} {
			kept, err := ReadFileWith(p, ReadOptions{Split: split})
			if err != nil {
				t.Fatalf("%s %q: %v", p, split, err)
			}
			d, err := ReadFileWith(p, ReadOptions{Split: split, Stream: true})
			if err != nil {
				t.Fatalf("%s %q streamed: %v", p, split, err)
			}
			if d.Rows != nil || d.Len() != len(kept.Rows) || d.Format != kept.Format || d.Conversational != kept.Conversational {
				t.Fatalf("%s %q streamed: %d rows kept, Len %d, %s; want none kept, %d, %s", p, split, len(d.Rows), d.Len(), d.Format, len(kept.Rows), kept.Format)
			}
			var got []Row
			if err := d.Each(func(r Row) error { got = append(got, r); return nil }); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, kept.Rows) {
				t.Errorf("%s %q: streamed rows differ from the kept ones", p, split)
			}
		}
	}
	bad := writeText(t, filepath.Join(dir, "bad.jsonl"), jsonlText(rows[:3])+"{\"prompt\": 1}\n")
	badArray := writeText(t, filepath.Join(dir, "bad.json"), `[{"prompt": "a", "completion": "b"},`+"\n"+`{"prompt": "c", "completion": }]`)
	for _, c := range []struct{ path, split string }{{bad, ""}, {bad, "train[-2:]"}, {badArray, ""}, {badArray, "train[-1:]"}} {
		_, errKept := ReadFileWith(c.path, ReadOptions{Split: c.split})
		_, errStream := ReadFileWith(c.path, ReadOptions{Split: c.split, Stream: true})
		if errKept == nil || errStream == nil || errKept.Error() != errStream.Error() || !strings.Contains(errStream.Error(), c.path+":") {
			t.Errorf("%s %q: streamed %v, kept %v", c.path, c.split, errStream, errKept)
		}
	}
	stop := errors.New("stop")
	d, _ := ReadFileWith(files[0], ReadOptions{Stream: true})
	n := 0
	if err := d.Each(func(Row) error { n++; return stop }); err != stop || n != 1 {
		t.Errorf("Each after its function's error: %v after %d rows", err, n)
	}
}

// A streamed read of a 32 MB JSON Lines file leaves nothing of it in memory, and Each hands over
// its 2,048 rows without keeping them.
func TestRead_StreamedKeepsNoRows(t *testing.T) {
	rows := bigRows()
	p := writeText(t, filepath.Join(t.TempDir(), "big.jsonl"), jsonlText(rows))
	heap := func() float64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return float64(m.HeapAlloc) / (1 << 20)
	}
	base := heap()
	kept, err := ReadFileWith(p, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keptMB := heap() - base
	runtime.KeepAlive(kept)
	kept = nil
	base = heap()
	d, err := ReadFileWith(p, ReadOptions{Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	streamedMB := heap() - base
	n, peak := 0, 0.0
	if err := d.Each(func(r Row) error {
		if n++; n%512 == 0 {
			peak = max(peak, heap()-base)
		}
		return nil
	}); err != nil || n != 2048 {
		t.Fatalf("Each: %d rows, %v", n, err)
	}
	t.Logf("kept %.1f MB; streamed %.2f MB after the first reading, at most %.2f MB during Each", keptMB, streamedMB, peak)
	if streamedMB > keptMB/10 || peak > keptMB/10 {
		t.Errorf("streamed: %.2f MB, %.2f MB during Each; the rows kept are %.1f MB", streamedMB, peak, keptMB)
	}
	runtime.KeepAlive(d)
}
