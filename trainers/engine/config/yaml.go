package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/posttrain/posttrain/data"

	"github.com/posttrain/posttrain/internal/fsmode"
)

// ResolvedName is the file, in OUTPUT_DIR, holding the resolved configuration of a run; it is a
// valid --config file for the same method.
const ResolvedName = "training_args.yaml"

// LoadFile sets the options named in the YAML file at path. Keys are TRL's names (learning_rate);
// an unknown or repeated key or a value of the wrong type is an error naming file:line.
func LoadFile(path string, cfg Config) error {
	_, err := LoadFileNotes(path, cfg)
	return err
}

// LoadFileNotes is LoadFile returning LoadNotes's notes.
func LoadFileNotes(path string, cfg Config) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return LoadNotes(path, data, cfg)
}

var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// docStart is the line of the last document marker (---) at or before line, or anywhere when
// line is 0 (an empty document).
func docStart(data []byte, line int) int {
	start := 0
	for i, l := range strings.Split(string(data), "\n") {
		if (line == 0 || i+1 <= line) && (l == "---" || strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "---\t") || l == "---\r") {
			start = i + 1
		}
	}
	return start
}

func yamlError(name string, err error) error {
	if m := yamlLine.FindStringSubmatch(err.Error()); m != nil {
		return fmt.Errorf("%s:%s: invalid YAML: %s", name, m[1], m[2])
	}
	return fmt.Errorf("%s: invalid YAML: %w", name, err)
}

// fileKeys are the top-level keys of a YAML config file (nil for an empty or unreadable one:
// LoadFile reports those).
func fileKeys(path string) map[string]bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	keys := map[string]bool{}
	for i := 0; i+1 < len(doc.Content[0].Content); i += 2 {
		keys[doc.Content[0].Content[i].Value] = true
	}
	return keys
}

// Load is LoadFile for a file's contents; name is used in error messages.
func Load(name string, data []byte, cfg Config) error {
	_, err := LoadNotes(name, data, cfg)
	return err
}

// LoadNotes is Load that also returns the notes on the TRL keys it took without an effect here
// (trlkeys.go), one line each ("config.yaml:4: attn_implementation: ..."). Every key posttrain
// cannot honour is named in one error, each with what to do.
func LoadNotes(name string, data []byte, cfg Config) ([]string, error) {
	notes, err := load(name, data, cfg)
	return notes, err
}

func load(name string, data []byte, cfg Config) ([]string, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, next yaml.Node
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(name, err)
	}
	// yaml.Unmarshal read the first document and ignored the others; PyYAML's safe_load, which
	// TRL's parser uses, refuses a second one.
	switch err := dec.Decode(&next); {
	case err == nil:
		return nil, fmt.Errorf("%s:%d: a second YAML document starts here: a config is one document", name, docStart(data, next.Line))
	case !errors.Is(err, io.EOF):
		return nil, yamlError(name, err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // empty file
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return nil, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: want a mapping of option: value (e.g. learning_rate: 1e-6)", name, root.Line)
	}
	byKey := map[string]field{}
	for _, f := range fields(cfg) {
		byKey[f.Key] = f
	}
	seen := map[string]int{}
	var notes, refused []string
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if line, dup := seen[k.Value]; dup {
			return nil, fmt.Errorf("%s:%d: key %q repeats line %d", name, k.Line, k.Value, line)
		}
		seen[k.Value] = k.Line
		f, ok := byKey[k.Value]
		if !ok {
			known, fine, say := trlKeyProblem(k.Value, v)
			switch {
			case !known:
				refused = append(refused, fmt.Sprintf("%d: unknown key %q for %s%s", k.Line, k.Value, cfg.Method(), suggest(k.Value, fields(cfg))))
			case !fine:
				refused = append(refused, fmt.Sprintf("%d: %s: %s: %s", k.Line, k.Value, scalarText(v), say))
			case say != "":
				notes = append(notes, fmt.Sprintf("%s:%d: %s taken with no effect: %s", name, k.Line, k.Value, say))
			}
			continue
		}
		if err := setNode(f, v); err != nil {
			refused = append(refused, fmt.Sprintf("%d: %s: %v", v.Line, k.Value, err))
		}
	}
	switch len(refused) {
	case 0:
		return notes, nil
	case 1:
		return nil, fmt.Errorf("%s:%s", name, refused[0])
	}
	return nil, fmt.Errorf("%s: %d keys cannot be honoured: line %s", name, len(refused), strings.Join(refused, "; line "))
}

// setNode sets the option f from a YAML value; null sets the zero value (TRL's None).
func setNode(f field, v *yaml.Node) error {
	if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
		f.Value.SetZero()
		return nil
	}
	switch p := f.Value.Addr().Interface().(type) {
	case *string, *float64, *int, *bool:
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("want %s, got a %s", typeName(f), kindName(v))
		}
		return setScalar(f.Value.Addr().Interface(), v.Value, typeName(f))
	case **bool:
		var b bool
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("want true, false or null, got a %s", kindName(v))
		}
		if err := setScalar(&b, v.Value, "true, false or null"); err != nil {
			return err
		}
		*p = &b
		return nil
	case *[]string:
		return setList(v, func(s string) error { *p = append(*p, strings.TrimSpace(s)); return nil }, func() { *p = nil })
	case *[]data.MixtureEntry:
		return setMixture(v, p)
	case *[]float64:
		return setList(v, func(s string) error {
			var x float64
			if err := setScalar(&x, s, "a list of numbers"); err != nil {
				return err
			}
			*p = append(*p, x)
			return nil
		}, func() { *p = nil })
	}
	return fmt.Errorf("unsupported option type %s", f.Value.Type())
}

// setMixture reads TRL's `datasets:` list: each entry a mapping of path, name, split and
// columns (DatasetConfig's data_dir and data_files, which name files inside a repo, are refused:
// give their directory as path).
func setMixture(v *yaml.Node, p *[]data.MixtureEntry) error {
	*p = nil
	if v.Kind != yaml.SequenceNode {
		return fmt.Errorf("want a list of datasets ({path, name, split, columns}), got a %s", kindName(v))
	}
	for i, e := range v.Content {
		if e.Kind != yaml.MappingNode {
			return fmt.Errorf("datasets[%d]: want a mapping, got a %s", i, kindName(e))
		}
		var m data.MixtureEntry
		for j := 0; j+1 < len(e.Content); j += 2 {
			k, val := e.Content[j].Value, e.Content[j+1]
			switch k {
			case "path", "name", "split":
				if val.Kind != yaml.ScalarNode {
					return fmt.Errorf("datasets[%d].%s: want a string, got a %s", i, k, kindName(val))
				}
				if val.Tag == "!!null" {
					continue
				}
				*map[string]*string{"path": &m.Path, "name": &m.Name, "split": &m.Split}[k] = val.Value
			case "columns":
				if val.Tag == "!!null" {
					continue
				}
				if err := setList(val, func(s string) error { m.Columns = append(m.Columns, strings.TrimSpace(s)); return nil }, func() { m.Columns = []string{} }); err != nil {
					return fmt.Errorf("datasets[%d].columns: %w", i, err)
				}
			case "data_dir", "data_files":
				if val.Tag != "!!null" {
					return fmt.Errorf("datasets[%d].%s: not supported: give the files' directory (or one file) as path", i, k)
				}
			default:
				return fmt.Errorf("datasets[%d]: unknown key %q (a dataset is path, name, split, columns)", i, k)
			}
		}
		if m.Path == "" {
			return fmt.Errorf("datasets[%d]: no path", i)
		}
		*p = append(*p, m)
	}
	return nil
}

// setList accepts a YAML sequence of scalars or one comma-separated scalar ("a,b"), as the flag does.
func setList(v *yaml.Node, add func(string) error, reset func()) error {
	reset()
	var items []string
	switch v.Kind {
	case yaml.SequenceNode:
		for _, e := range v.Content {
			if e.Kind != yaml.ScalarNode {
				return fmt.Errorf("want a list of values, got a %s inside it", kindName(e))
			}
			items = append(items, e.Value)
		}
	case yaml.ScalarNode:
		items = strings.Split(v.Value, ",")
	default:
		return fmt.Errorf("want a list, got a %s", kindName(v))
	}
	for _, s := range items {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

func setScalar(dst any, s, want string) error {
	var err error
	switch p := dst.(type) {
	case *string:
		*p = s
	case *float64:
		*p, err = strconv.ParseFloat(strings.TrimSpace(s), 64)
	case *int:
		*p, err = strconv.Atoi(strings.TrimSpace(s))
	case *bool:
		*p, err = strconv.ParseBool(strings.TrimSpace(s))
	}
	if err != nil {
		return fmt.Errorf("want %s, got %q", want, s)
	}
	return nil
}

func typeName(f field) string {
	switch f.Value.Interface().(type) {
	case float64:
		return "a number"
	case int:
		return "an integer"
	case bool:
		return "true or false"
	}
	return "a string"
}

func kindName(v *yaml.Node) string {
	switch v.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "value"
}

// suggest returns "; did you mean X?" for the key whose name or flag the given key spells
// (learning-rate, model), else the closest key by edit distance, or "".
func suggest(key string, fs []field) string {
	snake := strings.ReplaceAll(strings.ToLower(key), "-", "_")
	kebab := strings.ReplaceAll(snake, "_", "-")
	best, bestDist := "", 4
	for _, f := range fs {
		if f.Key == snake || f.Flag == kebab {
			return fmt.Sprintf("; did you mean %q?", f.Key)
		}
		if d := EditDistance(snake, f.Key); d < bestDist {
			best, bestDist = f.Key, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// EditDistance is the Levenshtein distance between a and b (the nearest option or flag to a
// misspelt one).
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(sub, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Marshal returns cfg as YAML with TRL's keys, headed by a comment naming the method.
func Marshal(cfg Config) ([]byte, error) {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# posttrain %s: resolved configuration; reuse with --config\n", cfg.Method())
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("encode %s config: %w", cfg.Method(), err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode %s config: %w", cfg.Method(), err)
	}
	return buf.Bytes(), nil
}

// WriteFile writes cfg as YAML to path atomically (temporary file, fsync, rename).
func WriteFile(path string, cfg Config) error {
	data, err := Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	tmp, err := fsmode.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write config: %w", err)
	}
	_, werr := tmp.Write(data)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return nil
}

// WriteResolved writes cfg to OUTPUT_DIR/training_args.yaml and returns the path.
func WriteResolved(cfg Config) (string, error) {
	path := filepath.Join(cfg.Common().OutputDir, ResolvedName)
	return path, WriteFile(path, cfg)
}
