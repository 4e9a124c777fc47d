package data

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// The columnar formats are read row by row into the JSON object `datasets.load_dataset` returns
// for the row (every column, None as null, nested lists and structs with their keys in schema
// order) and handed to the same row parser as JSONL, so a row means the same in every format.
//
// Parquet goes through github.com/parquet-go/parquet-go, Arrow IPC (datasets' save_to_disk
// files, the Hub's .arrow files) through github.com/apache/arrow-go's ipc package. arrow-go's own
// Parquet reader (pqarrow) links its compute kernels and gRPC (a 36 MB binary on its own);
// parquet-go reads the same files' nested LIST and struct columns (messages, tool_calls) to the
// same values (TestReadColumnar_EqualsLoadDataset) in a fifth of that.

// readParquet reads a Parquet file's rows, one row group at a time.
func readParquet(path string, b *rowBuilder) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read dataset: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read dataset: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("%s: not a Parquet file: %w", path, err)
	}
	schema := pf.Schema()
	r := parquet.NewReader(pf)
	defer r.Close()
	row := 1
	if w := b.win; w != nil && w.from > w.seen { // the rows before the window are not decoded
		n := min(int64(w.from-w.seen), pf.NumRows())
		if err := r.SeekToRow(n); err != nil {
			return fmt.Errorf("%s: row %d: %w", path, n+1, err)
		}
		w.seen += int(n)
		row += int(n)
	}
	var buf bytes.Buffer
	for ; ; row++ {
		if int64(row) > pf.NumRows() {
			return nil
		}
		keep, err := b.next()
		if err != nil {
			return err
		}
		m := map[string]any{}
		if err := r.Read(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: row %d: %w", path, row, err)
		}
		if !keep {
			continue
		}
		buf.Reset()
		if err := parquetJSON(&buf, schema, m); err != nil {
			return fmt.Errorf("%s: row %d: %w", path, row, err)
		}
		if err := b.add(row, buf.Bytes()); err != nil {
			return err
		}
	}
}

// parquetRowCount is the number of rows a Parquet file's footer gives.
func parquetRowCount(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	pf, err := parquet.OpenFile(f, st.Size(), parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, err
	}
	return int(pf.NumRows()), nil
}

// parquetJSON writes v, a value parquet-go read for node, as JSON with struct keys in the
// schema's order (LIST groups as arrays of their element).
func parquetJSON(w *bytes.Buffer, node parquet.Node, v any) error {
	if v == nil {
		w.WriteString("null")
		return nil
	}
	if lt := node.Type().LogicalType(); lt != nil && !node.Leaf() && isList(lt) {
		elem := node.Fields()[0]
		if !elem.Leaf() && len(elem.Fields()) == 1 && elem.Repeated() {
			elem = elem.Fields()[0] // the three-level layout: group (LIST) { repeated group list { element } }
		}
		xs, ok := v.([]any)
		if !ok {
			return fmt.Errorf("column %s: a %T for a list", node.String(), v)
		}
		w.WriteByte('[')
		for i, x := range xs {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := parquetJSON(w, elem, x); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	}
	if !node.Leaf() && !node.Repeated() {
		m, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("a %T for a struct", v)
		}
		w.WriteByte('{')
		for i, f := range node.Fields() {
			if i > 0 {
				w.WriteByte(',')
			}
			writeKey(w, f.Name())
			if err := parquetJSON(w, f, m[f.Name()]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	}
	return writeScalar(w, v)
}

func isList(lt *format.LogicalType) bool {
	_, ok := lt.Value.(*format.ListType)
	return ok
}

// writeScalar writes a leaf value as JSON: bytes as text when they are UTF-8, else base64.
func writeScalar(w *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case []byte:
		if utf8.Valid(x) {
			v = string(x)
		} else {
			v = base64.StdEncoding.EncodeToString(x)
		}
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return fmt.Errorf("a non-finite number (%g)", x)
		}
	case float32:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return fmt.Errorf("a non-finite number (%g)", x)
		}
		v = float64(x)
	case []any:
		w.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := writeScalar(w, e); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Write(b)
	return nil
}

func writeKey(w *bytes.Buffer, k string) {
	b, _ := json.Marshal(k)
	w.Write(b)
	w.WriteByte(':')
}

// readArrow reads an Arrow IPC file: the stream format datasets' save_to_disk writes, or the
// random-access file format ("ARROW1"), one record batch at a time.
func readArrow(path string, b *rowBuilder) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read dataset: %w", err)
	}
	defer f.Close()
	magic := make([]byte, 6)
	if _, err := io.ReadFull(f, magic); err != nil {
		return fmt.Errorf("%s: not an Arrow file: %w", path, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	row := 0
	var buf bytes.Buffer
	emit := func(rec arrow.RecordBatch) error {
		fields := rec.Schema().Fields()
		for i := 0; i < int(rec.NumRows()); i++ {
			row++
			if keep, err := b.next(); !keep || err != nil {
				if err != nil {
					return err
				}
				continue
			}
			buf.Reset()
			buf.WriteByte('{')
			for c, fld := range fields {
				if c > 0 {
					buf.WriteByte(',')
				}
				writeKey(&buf, fld.Name)
				if err := arrowJSON(&buf, rec.Column(c), i); err != nil {
					return fmt.Errorf("%s: row %d: column %s: %w", path, row, fld.Name, err)
				}
			}
			buf.WriteByte('}')
			if err := b.add(row, buf.Bytes()); err != nil {
				return err
			}
		}
		return nil
	}
	if string(magic) == "ARROW1" {
		fr, err := ipc.NewFileReader(f)
		if err != nil {
			return fmt.Errorf("%s: not an Arrow file: %w", path, err)
		}
		defer fr.Close()
		for i := 0; i < fr.NumRecords(); i++ {
			rec, err := fr.RecordBatch(i)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if err := emit(rec); err != nil {
				return err
			}
		}
		return nil
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return fmt.Errorf("%s: not an Arrow stream: %w", path, err)
	}
	defer r.Release()
	for r.Next() {
		if err := emit(r.RecordBatch()); err != nil {
			return err
		}
	}
	if err := r.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// arrowRowCount counts an Arrow IPC file's rows, one record batch at a time (each released before
// the next is read).
func arrowRowCount(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	magic := make([]byte, 6)
	if _, err := io.ReadFull(f, magic); err != nil {
		return 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	n := 0
	if string(magic) == "ARROW1" {
		fr, err := ipc.NewFileReader(f)
		if err != nil {
			return 0, err
		}
		defer fr.Close()
		for i := 0; i < fr.NumRecords(); i++ {
			rec, err := fr.RecordBatch(i)
			if err != nil {
				return 0, err
			}
			n += int(rec.NumRows())
		}
		return n, nil
	}
	r, err := ipc.NewReader(bufio.NewReaderSize(f, 1<<20))
	if err != nil {
		return 0, err
	}
	defer r.Release()
	for r.Next() {
		n += int(r.RecordBatch().NumRows())
	}
	return n, r.Err()
}

// arrowJSON writes element i of arr as JSON (structs' keys in schema order).
func arrowJSON(w *bytes.Buffer, arr arrow.Array, i int) error {
	if arr.IsNull(i) {
		w.WriteString("null")
		return nil
	}
	switch a := arr.(type) {
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		w.WriteByte('{')
		for k, f := range st.Fields() {
			if k > 0 {
				w.WriteByte(',')
			}
			writeKey(w, f.Name)
			if err := arrowJSON(w, a.Field(k), i); err != nil {
				return err
			}
		}
		w.WriteByte('}')
		return nil
	case array.ListLike:
		start, end := a.ValueOffsets(i)
		w.WriteByte('[')
		for j := start; j < end; j++ {
			if j > start {
				w.WriteByte(',')
			}
			if err := arrowJSON(w, a.ListValues(), int(j)); err != nil {
				return err
			}
		}
		w.WriteByte(']')
		return nil
	case *array.String:
		return writeScalar(w, a.Value(i))
	case *array.LargeString:
		return writeScalar(w, a.Value(i))
	case *array.Binary:
		return writeScalar(w, a.Value(i))
	case *array.Float32:
		return writeScalar(w, a.Value(i))
	case *array.Float64:
		return writeScalar(w, a.Value(i))
	case *array.Dictionary:
		return arrowJSON(w, a.Dictionary(), a.GetValueIndex(i))
	}
	return writeScalar(w, arr.GetOneForMarshal(i))
}

// naValues are the cells pandas.read_csv (what load_dataset's CSV builder uses) reads as
// missing, None in the dataset.
var naValues = map[string]bool{"": true, "#N/A": true, "#N/A N/A": true, "#NA": true, "-1.#IND": true, "-1.#QNAN": true,
	"-NaN": true, "-nan": true, "1.#IND": true, "1.#QNAN": true, "<NA>": true, "N/A": true, "NA": true, "NULL": true,
	"NaN": true, "None": true, "n/a": true, "nan": true, "null": true}

// readCSV reads a CSV file with a header row as load_dataset does (pandas.read_csv's defaults): a
// column whose cells all read as integers is integers, else as numbers numbers, else as True or
// False booleans, else text; the cells pandas counts as missing are null, and an integer column
// with missing cells is a number column (pandas' float64). The file is read twice: its columns'
// types first, then its rows.
func readCSV(path string, b *rowBuilder) error {
	var kinds []csvKind
	header, err := scanCSV(path, func(_ int, rec []string) error {
		if kinds == nil {
			kinds = make([]csvKind, len(rec))
			for c := range kinds {
				kinds[c] = csvKind{ints: true, floats: true, bools: true}
			}
		}
		for c, v := range rec {
			kinds[c].see(v)
		}
		return nil
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	_, err = scanCSV(path, func(line int, rec []string) error {
		keep, err := b.next()
		if !keep || err != nil {
			return err
		}
		buf.Reset()
		buf.WriteByte('{')
		for c, name := range header {
			if c > 0 {
				buf.WriteByte(',')
			}
			writeKey(&buf, name)
			cell := rec[c]
			switch k := kinds[c].kind(); {
			case naValues[cell]:
				buf.WriteString("null")
			case k == 'i':
				buf.WriteString(strings.TrimPrefix(cell, "+"))
			case k == 'f':
				x, _ := strconv.ParseFloat(cell, 64)
				if err := writeScalar(&buf, x); err != nil {
					return fmt.Errorf("%s:%d: column %s: %w", b.name, line, name, err)
				}
			case k == 'b':
				buf.WriteString(strconv.FormatBool(strings.EqualFold(cell, "true")))
			default:
				writeScalar(&buf, cell)
			}
		}
		buf.WriteByte('}')
		return b.add(line, buf.Bytes())
	})
	return err
}

// csvRowCount counts a CSV file's records after the header, as readCSV reads them.
func csvRowCount(path string) (int, error) {
	n := 0
	_, err := scanCSV(path, func(int, []string) error { n++; return nil })
	return n, err
}

// scanCSV opens a CSV file (gunzipping a .gz one) and hands each record after the header to row
// with its line; it returns the header.
func scanCSV(path string, row func(line int, rec []string) error) ([]string, error) {
	r, done, err := openData(path)
	if err != nil {
		return nil, err
	}
	defer done()
	cr := csv.NewReader(bufio.NewReaderSize(r, 1<<16))
	cr.FieldsPerRecord = 0
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s:1: %w", path, err)
	}
	header = slices.Clone(header)
	header[0] = strings.TrimPrefix(header[0], "\ufeff")
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return header, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		line, _ := cr.FieldPos(0)
		if err := row(line, rec); err != nil {
			return nil, err
		}
	}
}

// csvKind is what a column's cells so far read as, for pandas' type inference.
type csvKind struct{ ints, floats, bools, missing bool }

func (k *csvKind) see(v string) {
	if naValues[v] {
		k.missing = true
		return
	}
	if k.ints {
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			k.ints = false
		}
	}
	if k.floats {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			k.floats = false
		}
	}
	if k.bools && !strings.EqualFold(v, "true") && !strings.EqualFold(v, "false") {
		k.bools = false
	}
}

// kind is the column's type as pandas infers it: 'i', 'f', 'b' or 's'.
func (k csvKind) kind() byte {
	switch {
	case k.ints && !k.missing:
		return 'i'
	case k.ints || k.floats:
		return 'f'
	case k.bools && !k.missing:
		return 'b'
	}
	return 's'
}
