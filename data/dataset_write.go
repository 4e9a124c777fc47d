package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// WriteJSONL writes rows of the given format as JSON Lines, TRL's keys first in the order
// prompt, completion|chosen, rejected|label (or text|messages), then the extra columns sorted by
// name. Non-ASCII text is written as UTF-8, not \u escapes.
func WriteJSONL(w io.Writer, format Format, rows []Row) error {
	bw := bufio.NewWriter(w)
	for i, r := range rows {
		line, err := MarshalRow(format, r)
		if err != nil {
			return fmt.Errorf("write row %d: %w", i, err)
		}
		bw.Write(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// MarshalRow encodes one row as a JSON object (no trailing newline).
func MarshalRow(format Format, r Row) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	n := 0
	put := func(key string, v any) error {
		val, err := marshalNoEscape(v)
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if n > 0 {
			b.WriteByte(',')
		}
		k, _ := marshalNoEscape(key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(val)
		n++
		return nil
	}
	text := func(t Text) any {
		if t.Conversational() {
			return t.Messages
		}
		return t.String
	}
	var err error
	switch format {
	case LanguageModeling:
		if r.Text.Conversational() {
			err = put("messages", r.Text.Messages)
		} else {
			err = put("text", r.Text.String)
		}
	case PromptCompletion:
		err = firstErr(put("prompt", text(r.Prompt)), put("completion", text(r.Completion)))
	case Preference:
		err = firstErr(put("prompt", text(r.Prompt)), put("chosen", text(r.Chosen)), put("rejected", text(r.Rejected)))
	case Unpaired:
		err = firstErr(put("prompt", text(r.Prompt)), put("completion", text(r.Completion)), put("label", r.Label))
	case PromptOnly:
		err = put("prompt", text(r.Prompt))
	default:
		return nil, fmt.Errorf("cannot write format %v", format)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(r.Columns))
	for k := range r.Columns {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if err := put(k, r.Columns[k]); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
