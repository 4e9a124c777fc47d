package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Message is one turn of a conversation in the OpenAI/TRL shape: {"role", "content", ...}.
// Keys other than role and content (tool_calls, reasoning_content, name, ...) are kept verbatim
// and in file order in Extra, so the template sees exactly what the file holds.
type Message struct {
	Role    string
	Content string
	Extra   []Field
	// NoContent is set when the JSON message had no "content" or a null one (rendered as "");
	// Validate accepts that only for an assistant message with tool_calls.
	NoContent bool
}

// Field is one extra key of a message object, its value as raw JSON.
type Field struct {
	Key   string
	Value json.RawMessage
}

// Roles are the roles the Qwen templates (and TRL's validation) know.
var Roles = []string{"system", "user", "assistant", "tool"}

// UnmarshalJSON reads a message object. "content" may be a string or null (read as ""); role must
// be a string. Unknown roles are not rejected here: see Validate.
func (m *Message) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("message must be a JSON object, got %s", JSONKind(data))
	}
	*m = Message{NoContent: true}
	var sawRole bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return err
		}
		key := kt.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		switch key {
		case "role":
			if err := json.Unmarshal(raw, &m.Role); err != nil {
				return fmt.Errorf(`message "role" must be a string, got %s`, JSONKind(raw))
			}
			sawRole = true
		case "content":
			if string(raw) == "null" {
				continue
			}
			if err := json.Unmarshal(raw, &m.Content); err != nil {
				return fmt.Errorf(`message "content" must be a string, got %s`, JSONKind(raw))
			}
			m.NoContent = false
		default:
			m.Extra = append(m.Extra, Field{Key: key, Value: append(json.RawMessage(nil), raw...)})
		}
	}
	if !sawRole {
		return fmt.Errorf(`message has no "role"`)
	}
	return nil
}

// MarshalJSON writes role, content, then the extra keys in order.
func (m Message) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"role":`)
	b.Write(jsonString(m.Role))
	b.WriteString(`,"content":`)
	b.Write(jsonString(m.Content))
	for _, f := range m.Extra {
		b.WriteByte(',')
		b.Write(jsonString(f.Key))
		b.WriteByte(':')
		if err := json.Compact(&b, f.Value); err != nil {
			return nil, fmt.Errorf("message key %q: %w", f.Key, err)
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// jsonString encodes s without HTML escaping, so "<|im_end|>" stays readable.
func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// Validate checks that the role is one of Roles and that the message has content: a null or
// missing "content" would render as nothing without a word, so only an assistant message that
// calls tools (a "tool_calls" key, content null in the OpenAI format) may omit it.
func (m Message) Validate() error {
	known := false
	for _, r := range Roles {
		known = known || m.Role == r
	}
	if !known {
		return fmt.Errorf("unknown role %q (want one of system, user, assistant, tool)", m.Role)
	}
	if m.NoContent && (m.Role != "assistant" || !m.hasExtra("tool_calls")) {
		return fmt.Errorf(`%s message has no "content" (missing or null); only an assistant message with "tool_calls" may omit it`, m.Role)
	}
	return nil
}

func (m Message) hasExtra(key string) bool {
	for _, f := range m.Extra {
		if f.Key == key {
			return true
		}
	}
	return false
}

// templateValue converts the message to the ordered dict a template sees.
func (m Message) templateValue() (any, error) {
	d := newDict("role", m.Role, "content", m.Content)
	for _, f := range m.Extra {
		v, err := decodeJSON(f.Value)
		if err != nil {
			return nil, fmt.Errorf("message key %q: %w", f.Key, err)
		}
		d.Pairs = setPair(d.Pairs, f.Key, v)
	}
	return d, nil
}

// JSONKind names the JSON type of raw for error messages: "a string", "an array", ...
func JSONKind(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// Equal reports whether a and b are the same message (role, content and extra keys).
func Equal(a, b Message) bool {
	x, _ := a.MarshalJSON()
	y, _ := b.MarshalJSON()
	return bytes.Equal(x, y)
}
