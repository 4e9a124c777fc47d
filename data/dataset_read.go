package data

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/posttrain/posttrain/data/chat"
)

// ReadFile reads a dataset from a JSONL file (one object per line) or a JSON file holding one
// array of objects; which one is told by the first non-blank byte ('[' = JSON array). format
// FormatAuto detects the format from the first row. A malformed row is an error "path:line: ...";
// no row is skipped (blank JSONL lines are not rows).
func ReadFile(path string, format Format) (*Dataset, error) {
	return ReadFileWith(path, ReadOptions{Format: format})
}

// ReadOptions say how a dataset file is read.
type ReadOptions struct {
	Format Format // FormatAuto: detected from the first row
	// TextField is the column standard language-modelling rows are read from, TRL's SFTConfig
	// dataset_text_field; "" means DefaultTextField. Conversational rows are always "messages".
	TextField string
	// Split is the split to read, with an optional slice (TRL's dataset_train_split or
	// dataset_test_split: "train", "train[:1000]", "test[10%:]", "train+test"); "" is "train".
	Split string
	// Config is the dataset's configuration (TRL's dataset_config, load_dataset's name): one of
	// the configs of a Hub directory's README.md; "" is its default.
	Config string
	// Stream keeps no rows: the files are read once to check every row (errors name the file and
	// line, as a read that keeps them) and count them, and the dataset's Each reads them again,
	// handing them over one at a time, so a trainer that consumes rows as they come (SFT) holds
	// none of the file in memory. A mixture's rows are kept.
	Stream bool

	win  *window         // set by readSplits for a head slice
	each func(Row) error // streaming: each row, in place of keeping it
}

// DefaultTextField is TRL's dataset_text_field default.
const DefaultTextField = "text"

// ReadFileWith is ReadFile with options.
//
// The file's extension picks its format: .parquet, .arrow (Arrow IPC: datasets' save_to_disk
// files), .csv, else JSONL or JSON; .gz after any of .jsonl, .json and .csv is gunzipped first.
// Rows of Parquet and Arrow files are named by their 1-based row number in errors.
//
// path may also be a dataset directory, and o may name a split (with a slice) and a config: see
// layout.go.
func ReadFileWith(path string, o ReadOptions) (*Dataset, error) {
	if o.Stream && o.each == nil {
		return stream(path, o)
	}
	if st, err := os.Stat(path); (err == nil && st.IsDir()) || o.Split != "" || o.Config != "" {
		return readSplits(path, o)
	}
	return readFile(path, o)
}

// stream reads the dataset at path once, checking and counting its rows without keeping them,
// and sets its Each to read them again (ReadOptions.Stream).
func stream(path string, o ReadOptions) (*Dataset, error) {
	o.each = func(Row) error { return nil }
	d, err := ReadFileWith(path, o)
	if err != nil {
		return nil, err
	}
	o.Format = d.Format // the second reading reads what the first detected
	d.each = func(fn func(Row) error) error {
		again := o
		again.each = fn
		_, err := ReadFileWith(path, again)
		return err
	}
	return d, nil
}

// readFile reads one data file, as a stream: no reader holds more of the file than a row (CSV
// reads it twice, its column types first). With a window (o.win) only the window's rows are
// parsed, reading stops at its end, and a file may give no rows.
func readFile(path string, o ReadOptions) (*Dataset, error) {
	d, b := newBuilder(path, o)
	var err error
	switch ext := fileFormat(path); ext {
	case ".parquet":
		b.rows = true
		err = readParquet(path, b)
	case ".arrow":
		b.rows = true
		err = readArrow(path, b)
	case ".csv":
		err = readCSV(path, b)
	default:
		r, done, oerr := openData(path)
		if oerr != nil {
			return nil, oerr
		}
		err = readJSONRows(bufio.NewReaderSize(r, 1<<16), b)
		done()
	}
	if err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	if o.win != nil {
		return d, nil
	}
	return checked(d)
}

// openData opens a data file, gunzipping a .gz one; done closes it.
func openData(path string) (io.Reader, func(), error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read dataset: %w", err)
	}
	if !strings.HasSuffix(path, ".gz") {
		return f, func() { f.Close() }, nil
	}
	zr, err := gzip.NewReader(bufio.NewReaderSize(f, 1<<16))
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return zr, func() { zr.Close(); f.Close() }, nil
}

// fileFormat is path's format extension, a .gz suffix aside: ".parquet", ".arrow", ".csv", or
// what else it ends with.
func fileFormat(path string) string {
	return strings.ToLower(filepath.Ext(strings.TrimSuffix(path, ".gz")))
}

func newBuilder(name string, o ReadOptions) (*Dataset, *rowBuilder) {
	if o.TextField == "" {
		o.TextField = DefaultTextField
	}
	d := &Dataset{Path: name, Format: o.Format, TextField: o.TextField}
	return d, &rowBuilder{d: d, name: name, win: o.win, each: o.each}
}

// checked is d, or an error when it has no rows.
func checked(d *Dataset) (*Dataset, error) {
	if err := d.checkRows(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Dataset) checkRows() error {
	if d.Len() == 0 {
		return fmt.Errorf("%s: no rows", d.Path)
	}
	return nil
}

// Read is ReadFile on an open stream; name is used in errors.
func Read(r io.Reader, name string, format Format) (*Dataset, error) {
	return ReadWith(r, name, ReadOptions{Format: format})
}

// ReadWith is ReadFileWith on an open stream (JSONL or a JSON array); name is used in errors.
func ReadWith(r io.Reader, name string, o ReadOptions) (*Dataset, error) {
	d, b := newBuilder(name, o)
	if err := readJSONRows(bufio.NewReaderSize(r, 1<<16), b); err != nil && !errors.Is(err, errEnough) {
		return nil, err
	}
	return checked(d)
}

// readJSONRows reads JSONL, or a JSON array where the first byte that is not a space is '['.
func readJSONRows(r *bufio.Reader, b *rowBuilder) error {
	array, err := jsonHead(r, b.name)
	if err != nil {
		return err
	}
	if array {
		return readJSONArray(r, b)
	}
	return scanLines(r, b.name, func(line int, text []byte) error {
		keep, err := b.next()
		if !keep || err != nil {
			return err
		}
		return b.add(line, text)
	})
}

// jsonHead reads past a UTF-8 byte-order mark (not data) and reports whether the stream is a JSON
// array (its first byte that is not a space is '[') rather than JSON Lines; a Parquet or Arrow
// file is an error. name names the stream in errors.
func jsonHead(r *bufio.Reader, name string) (array bool, err error) {
	if bom, _ := r.Peek(3); string(bom) == "\ufeff" {
		r.Discard(3)
	}
	if m, _ := r.Peek(4); string(m) == "PAR1" || string(m) == "\xff\xff\xff\xff" || string(m) == "ARRO" {
		return false, fmt.Errorf("%s: a Parquet or Arrow file: name it with its extension, .parquet or .arrow", name)
	}
	head, _ := r.Peek(r.Size())
	t := bytes.TrimLeft(head, " \t\r\n")
	return len(t) > 0 && t[0] == '[', nil
}

// scanLines hands each line of r that is not blank (JSON Lines' rows), trimmed, to row with its
// 1-based line number. Every line is read into one reused buffer, so row must not keep the bytes
// (the row parser copies what it keeps) and a line row skips costs no allocation.
func scanLines(r *bufio.Reader, name string, row func(line int, text []byte) error) error {
	var buf []byte
	for line := 1; ; line++ {
		var err error
		buf = buf[:0]
		for {
			var frag []byte
			frag, err = r.ReadSlice('\n')
			buf = append(buf, frag...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if text := bytes.TrimSpace(buf); len(text) > 0 {
			if rerr := row(line, text); rerr != nil {
				return rerr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read dataset %s: %w", name, err)
		}
	}
}

// jsonRowCount counts the rows of a JSON Lines file or a JSON array (gzipped or not) as the
// readers read them: JSON Lines' lines that are not blank, unparsed; an array's values, decoded
// one at a time into a buffer let go at once.
func jsonRowCount(path string) (int, error) {
	r, done, err := openData(path)
	if err != nil {
		return 0, err
	}
	defer done()
	br := bufio.NewReaderSize(r, 1<<16)
	array, err := jsonHead(br, path)
	if err != nil {
		return 0, err
	}
	n := 0
	if !array {
		err = scanLines(br, path, func(int, []byte) error { n++; return nil })
		return n, err
	}
	dec := json.NewDecoder(br)
	if _, err := dec.Token(); err != nil {
		return 0, err
	}
	for dec.More() {
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// readJSONArray reads the rows of one top-level JSON array, each named by the line it starts on.
func readJSONArray(r io.Reader, b *rowBuilder) error {
	lr := &lineReader{r: r, line: 1}
	dec := json.NewDecoder(lr)
	if _, err := dec.Token(); err != nil { // '['
		return fmt.Errorf("%s:1: invalid JSON: %v", b.name, err)
	}
	for dec.More() {
		start := lr.valueLine(dec.InputOffset())
		keep, err := b.next()
		if err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%s:%d: invalid JSON: %v", b.name, start, err)
		}
		if keep {
			if err := b.add(start, raw); err != nil {
				return err
			}
		}
	}
	if _, err := dec.Token(); err != nil { // ']'
		return fmt.Errorf("%s:%d: invalid JSON: %v", b.name, lr.lineAt(dec.InputOffset()), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%s:%d: invalid JSON: data after the top-level array", b.name, lr.lineAt(dec.InputOffset()))
	}
	return nil
}

// lineReader is a reader that numbers lines for a decoder reading through it: it keeps the bytes
// the decoder has read and not yet had numbered (its read-ahead), no more.
type lineReader struct {
	r    io.Reader
	buf  []byte // the bytes read from offset base on
	base int64
	line int // the line of offset base
}

func (l *lineReader) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	l.buf = append(l.buf, p[:n]...)
	return n, err
}

// lineAt is the 1-based line of offset off (offsets non-decreasing).
func (l *lineReader) lineAt(off int64) int {
	k := int(min(max(off-l.base, 0), int64(len(l.buf))))
	l.line += bytes.Count(l.buf[:k], []byte("\n"))
	l.buf = append(l.buf[:0], l.buf[k:]...)
	l.base += int64(k)
	return l.line
}

// valueLine is the line of the value after offset off, past spaces and a comma.
func (l *lineReader) valueLine(off int64) int {
	l.lineAt(off)
	k := 0
	for k < len(l.buf) && bytes.IndexByte([]byte(" \t\r\n,"), l.buf[k]) >= 0 {
		k++
	}
	return l.lineAt(l.base + int64(k))
}

// rowBuilder validates rows one at a time against the dataset's (possibly detected) format.
type rowBuilder struct {
	d        *Dataset
	name     string
	rows     bool    // errors name a row number, not a line (Parquet, Arrow)
	implicit *bool   // preference: whether rows carry no "prompt"; set by the first row
	win      *window // nil: every row
	each     func(Row) error
}

// window is the rows a split's head slice keeps (train[:1000], train[10:20]), counted across the
// split's files: rows before from are counted and not parsed, and reading stops at to, so that a
// slice reads as much of its files as it keeps.
type window struct{ from, to, seen int }

// full reports whether the window has all its rows.
func (w *window) full() bool { return w != nil && w.seen >= w.to }

// errEnough stops a reader at the end of its window.
var errEnough = errors.New("the slice's rows are read")

// next counts the reader's next row: whether to parse it (false before the window), errEnough
// past the window.
func (b *rowBuilder) next() (bool, error) {
	if b.win == nil {
		return true, nil
	}
	if b.win.full() {
		return false, errEnough
	}
	b.win.seen++
	return b.win.seen > b.win.from, nil
}

func (b *rowBuilder) add(line int, raw []byte) error {
	row, err := b.parse(line, raw)
	if err != nil {
		if b.rows {
			return fmt.Errorf("%s: row %d: %w", b.name, line, err)
		}
		return fmt.Errorf("%s:%d: %w", b.name, line, err)
	}
	if b.each != nil {
		b.d.streamed++
		return b.each(row)
	}
	b.d.Rows = append(b.d.Rows, row)
	return nil
}

func (b *rowBuilder) parse(line int, raw []byte) (Row, error) {
	if err := checkText(raw); err != nil {
		return Row{}, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return Row{}, fmt.Errorf("row must be a JSON object, got %s", chat.JSONKind(raw))
		}
		return Row{}, fmt.Errorf("invalid JSON: %v", err)
	}
	if obj == nil {
		return Row{}, fmt.Errorf("row must be a JSON object, got null")
	}
	has := func(k string) bool { _, ok := obj[k]; return ok }
	if b.d.Format == FormatAuto {
		f, err := detectFormat(has, b.d.TextField)
		if err != nil {
			return Row{}, fmt.Errorf("%w; keys: %v", err, sortedKeys(obj))
		}
		b.d.Format = f
	}
	row := Row{Line: line}
	var texts []Text
	field := func(key string, dst *Text) error {
		raw, ok := obj[key]
		if !ok {
			return fmt.Errorf("missing %q (format %s)", key, b.d.Format)
		}
		t, err := parseText(key, raw)
		if err != nil {
			return err
		}
		*dst = t
		texts = append(texts, t)
		return nil
	}
	var err error
	switch b.d.Format {
	case LanguageModeling:
		err = b.parseLM(obj, &row, field)
	case PromptCompletion:
		err = errors.Join(field("prompt", &row.Prompt), field("completion", &row.Completion))
	case Preference:
		err = b.parsePreference(obj, &row, field)
	case Unpaired:
		err = errors.Join(field("prompt", &row.Prompt), field("completion", &row.Completion))
		if err == nil {
			err = parseLabel(obj, &row)
		}
	case PromptOnly:
		err = field("prompt", &row.Prompt)
	default:
		err = fmt.Errorf("unknown format %v", b.d.Format)
	}
	if err != nil {
		return Row{}, err
	}
	if err := b.checkKind(texts); err != nil {
		return Row{}, err
	}
	if row.Tools, err = parseTools(obj["tools"]); err != nil {
		return Row{}, err
	}
	row.Columns, err = extraColumns(obj, b.d.keys())
	return row, err
}

func (b *rowBuilder) parseLM(obj map[string]json.RawMessage, row *Row, field func(string, *Text) error) error {
	key := b.d.TextField
	_, hasText := obj[key]
	_, hasMsgs := obj["messages"]
	hasText = hasText && key != "messages"
	switch {
	case hasText && hasMsgs:
		return fmt.Errorf(`both %q and "messages": a language-modelling row has one`, key)
	case hasText:
		if err := field(key, &row.Text); err != nil {
			return err
		}
		if row.Text.Conversational() {
			return fmt.Errorf(`%q must be a string; use "messages" for a conversation`, key)
		}
	case hasMsgs:
		if err := field("messages", &row.Text); err != nil {
			return err
		}
		if !row.Text.Conversational() {
			return fmt.Errorf(`"messages" must be a list of messages`)
		}
	case key != DefaultTextField:
		return fmt.Errorf(`missing %q (dataset_text_field) or "messages" (format %s)`, key, LanguageModeling)
	default:
		return fmt.Errorf(`missing "text" or "messages" (format %s)`, LanguageModeling)
	}
	return nil
}

func (b *rowBuilder) parsePreference(obj map[string]json.RawMessage, row *Row, field func(string, *Text) error) error {
	_, hasPrompt := obj["prompt"]
	if b.implicit == nil {
		implicit := !hasPrompt
		b.implicit = &implicit
		b.d.ImplicitPrompt = implicit
	} else if *b.implicit == hasPrompt {
		return fmt.Errorf(`"prompt" present in some preference rows and absent in others`)
	}
	if err := errors.Join(field("chosen", &row.Chosen), field("rejected", &row.Rejected)); err != nil {
		return err
	}
	// Before the implicit prompt is extracted, which compares the two as one kind: a message
	// list against a string read as "chosen or rejected is empty".
	if c, r := row.Chosen.Conversational(), row.Rejected.Conversational(); c != r {
		return fmt.Errorf(`mixes conversational and standard fields: "chosen" is %s, "rejected" is %s`, kindText(c), kindText(r))
	}
	if hasPrompt {
		return field("prompt", &row.Prompt)
	}
	return extractPrompt(row)
}

func parseLabel(obj map[string]json.RawMessage, row *Row) error {
	raw := obj["label"]
	if err := json.Unmarshal(raw, &row.Label); err != nil || string(bytes.TrimSpace(raw)) == "null" {
		return fmt.Errorf(`"label" must be true or false, got %s`, chat.JSONKind(raw))
	}
	return nil
}

// checkKind requires one row's fields, and all rows, to be all standard or all conversational.
func (b *rowBuilder) checkKind(texts []Text) error {
	if len(texts) == 0 {
		return nil
	}
	conv := texts[0].Conversational()
	for _, t := range texts[1:] {
		if t.Conversational() != conv {
			return fmt.Errorf("mixes conversational (message lists) and standard (string) fields")
		}
	}
	if b.d.Len() == 0 {
		b.d.Conversational = conv
		return nil
	}
	if conv != b.d.Conversational {
		return fmt.Errorf("row is %s but the rows before it are %s", kindName(conv), kindName(b.d.Conversational))
	}
	return nil
}

func kindText(conv bool) string {
	if conv {
		return "a message list"
	}
	return "a string"
}

func kindName(conv bool) string {
	if conv {
		return "conversational"
	}
	return "standard"
}

// parseTools reads a row's "tools" column: a list of JSON schemas (objects), kept as written so
// that a template's tojson prints their keys in the dataset's order; absent or null is none.
func parseTools(raw json.RawMessage) ([]json.RawMessage, error) {
	if raw == nil || chat.JSONKind(raw) == "null" {
		return nil, nil
	}
	var tools []json.RawMessage
	if chat.JSONKind(raw) != "an array" || json.Unmarshal(raw, &tools) != nil {
		return nil, fmt.Errorf(`"tools" must be a list of function schemas (objects), got %s`, chat.JSONKind(raw))
	}
	for i, t := range tools {
		if chat.JSONKind(t) != "an object" {
			return nil, fmt.Errorf(`"tools"[%d]: a function schema must be an object, got %s`, i, chat.JSONKind(t))
		}
	}
	if tools == nil {
		tools = []json.RawMessage{}
	}
	return tools, nil
}

// parseText reads a string or a non-empty list of valid messages.
func parseText(key string, raw json.RawMessage) (Text, error) {
	switch chat.JSONKind(raw) {
	case "a string":
		var s string
		err := json.Unmarshal(raw, &s)
		return Text{String: s}, err
	case "an array":
	default:
		return Text{}, fmt.Errorf("%q must be a string or a list of messages, got %s", key, chat.JSONKind(raw))
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return Text{}, fmt.Errorf("%q: %v", key, err)
	}
	if len(items) == 0 {
		return Text{}, fmt.Errorf("%q is an empty list of messages", key)
	}
	msgs := make([]chat.Message, len(items))
	for i, it := range items {
		if chat.JSONKind(it) != "an object" {
			return Text{}, fmt.Errorf("%q[%d]: a message must be an object, got %s", key, i, chat.JSONKind(it))
		}
		if err := json.Unmarshal(it, &msgs[i]); err != nil {
			return Text{}, fmt.Errorf("%q[%d]: %v", key, i, err)
		}
		if err := msgs[i].Validate(); err != nil {
			return Text{}, fmt.Errorf("%q[%d]: %v", key, i, err)
		}
	}
	return Text{Messages: msgs}, nil
}

func extraColumns(obj map[string]json.RawMessage, keys []string) (map[string]any, error) {
	own := map[string]bool{}
	for _, k := range keys {
		own[k] = true
	}
	var cols map[string]any
	for k, raw := range obj {
		if own[k] {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("column %q: %v", k, err)
		}
		if cols == nil {
			cols = map[string]any{}
		}
		cols[k] = v
	}
	return cols, nil
}

func sortedKeys(obj map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkText refuses what encoding/json would silently turn into U+FFFD: bytes that are not UTF-8,
// and a \u escape of a lone UTF-16 surrogate (a high one not followed by a low one, or a low one
// alone). A model would otherwise train on replacement characters nobody wrote.
func checkText(raw []byte) error {
	if !utf8.Valid(raw) {
		for i := 0; i < len(raw); {
			r, n := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && n <= 1 {
				return fmt.Errorf("invalid UTF-8 at byte %d of the row (0x%02x)", i, raw[i])
			}
			i += n
		}
	}
	surrogate := func(i int) (rune, bool) { // the \uXXXX escape at raw[i] ('\\'), if any
		if i+6 > len(raw) || raw[i+1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(string(raw[i+2:i+6]), 16, 16)
		return rune(v), err == nil
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		r, ok := surrogate(i)
		switch {
		case !ok:
			i++ // another escape: skip the escaped byte
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := surrogate(i + 6); !ok || lo < 0xDC00 || lo > 0xDFFF {
				return fmt.Errorf("lone UTF-16 surrogate \\u%04X at byte %d of the row (a high surrogate must be followed by a low one)", r, i)
			}
			i += 11
		case r >= 0xDC00 && r <= 0xDFFF:
			return fmt.Errorf("lone UTF-16 surrogate \\u%04X at byte %d of the row (a low surrogate without a high one)", r, i)
		default:
			i += 5
		}
	}
	return nil
}
