package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/posttrain/posttrain/internal/checkpoint"
)

// field is one option of a configuration, found by reflection over its struct tags.
type field struct {
	Key   string   // YAML key, TRL's name: "learning_rate"
	Flag  string   // flag name: "learning-rate"
	Usage string   // help text
	Group string   // help category: "training" or the method's struct name
	Enum  []string // allowed values, nil if free
	// Resume is how a resumed run treats the option (tag resume): "" = it changes the training
	// trajectory and must equal the checkpoint's value; "free" = it may change; "content" = the
	// path may change but what it names must not (compared by fingerprint).
	Resume string
	Input  bool          // tag input:"path": a file or directory the run reads
	Value  reflect.Value // the settable field
}

// fields lists the options of cfg (a pointer to a config struct), inlined structs first, in
// declaration order.
func fields(cfg any) []field {
	v := reflect.ValueOf(cfg)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		panic("config: fields needs a pointer to a struct")
	}
	var out []field
	group := "" // the struct's name, or the method's for a configuration
	if c, ok := cfg.(Config); ok {
		group = c.Method()
	}
	collect(v.Elem(), group, &out)
	return out
}

func collect(v reflect.Value, group string, out *[]field) {
	t := v.Type()
	if group == "" {
		group = strings.ToLower(t.Name())
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		key, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if sf.Anonymous && strings.Contains(opts, "inline") {
			collect(v.Field(i), strings.ToLower(sf.Type.Name()), out)
			continue
		}
		if key == "" || key == "-" {
			continue
		}
		f := field{Key: key, Flag: sf.Tag.Get("flag"), Usage: sf.Tag.Get("usage"), Group: group, Value: v.Field(i), Resume: sf.Tag.Get("resume"),
			Input: sf.Tag.Get("input") == "path"}
		if f.Flag == "" {
			f.Flag = strings.ReplaceAll(key, "_", "-")
		}
		if e := sf.Tag.Get("enum"); e != "" {
			f.Enum = strings.Split(e, "|")
		}
		*out = append(*out, f)
	}
}

// lookup returns the option with YAML key key.
func lookup(cfg any, key string) (field, bool) {
	for _, f := range fields(cfg) {
		if f.Key == key {
			return f, true
		}
	}
	return field{}, false
}

// Keys returns the YAML keys a method's config file accepts, in declaration order.
func Keys(cfg Config) []string {
	fs := fields(cfg)
	keys := make([]string, len(fs))
	for i, f := range fs {
		keys[i] = f.Key
	}
	return keys
}

// optionError is an invalid option: "learning_rate (--learning-rate) must be > 0, got -1".
type optionError struct {
	key, flag, msg string
}

func (e *optionError) Error() string {
	return e.key + " (--" + e.flag + ") " + e.msg
}

// Bad returns the error for option key of cfg.
func Bad(cfg any, key, msg string) error {
	flag := strings.ReplaceAll(key, "_", "-")
	if f, ok := lookup(cfg, key); ok {
		flag = f.Flag
	}
	return &optionError{key: key, flag: flag, msg: msg}
}

// OptionValue is one option of a configuration as other packages see it.
type OptionValue struct {
	Key   string // YAML key
	Group string // "training" for the options every trainer shares, else the method
	Value any
}

// Options lists cfg's options with their values, in declaration order (the shared ones first).
func Options(cfg Config) []OptionValue {
	fs := fields(cfg)
	out := make([]OptionValue, len(fs))
	for i, f := range fs {
		out[i] = OptionValue{Key: f.Key, Group: f.Group, Value: f.Value.Interface()}
	}
	return out
}

// Option returns cfg's option with YAML key key.
func Option(cfg Config, key string) (OptionValue, bool) {
	f, ok := lookup(cfg, key)
	if !ok {
		return OptionValue{}, false
	}
	return OptionValue{Key: f.Key, Group: f.Group, Value: f.Value.Interface()}, true
}

// Inputs returns the paths cfg's run reads (the options tagged input:"path": the model, the
// datasets, reward and value models, a chat template), each named by its key and flag, for the
// output-directory check (checkpoint.CheckOutside). Empty options are left out.
func Inputs(cfg Config) []checkpoint.Input {
	var out []checkpoint.Input
	for _, f := range fields(cfg) {
		if !f.Input {
			continue
		}
		name := fmt.Sprintf("%s (--%s)", f.Key, f.Flag)
		switch v := f.Value.Interface().(type) {
		case string:
			if v != "" {
				out = append(out, checkpoint.Input{Name: name, Path: v})
			}
		case []string:
			for _, p := range v {
				if p != "" {
					out = append(out, checkpoint.Input{Name: name, Path: p})
				}
			}
		default:
			panic(fmt.Sprintf("config: input option %s has type %T", f.Key, v))
		}
	}
	return out
}
