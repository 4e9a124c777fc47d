package config

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// OverrideAll as resume_override skips the comparison with the checkpoint's arguments altogether.
const OverrideAll = "all"

// Change is one option whose value differs between a checkpoint's training_args.yaml and the run
// resuming from it.
type Change struct {
	Key, Flag  string
	Saved, Now string // the values as YAML scalars or flow lists
}

func (c Change) String() string { return fmt.Sprintf("%s %s → %s", c.Key, c.Saved, c.Now) }

var methodComment = regexp.MustCompile(`^# posttrain (\S+):`)

// SavedMethod returns the method named in the header comment that Marshal writes.
func SavedMethod(saved []byte) string {
	line, _, _ := bytes.Cut(saved, []byte("\n"))
	if m := methodComment.FindSubmatch(line); m != nil {
		return string(m[1])
	}
	return ""
}

// ResumeChanges compares a checkpoint's resolved configuration (saved, the training_args.yaml
// Marshal wrote; name is its path for errors) with cur, the resolved configuration of the run that
// resumes it. It returns the options that change the training trajectory (every option without
// the resume:"free" or resume:"content" tag) and differ, and, apart, those among them that
// resume_override lets differ. The saved file is read as a configuration of cur's method: a
// checkpoint of another method is an error.
func ResumeChanges(saved []byte, name string, cur Config) (refused, allowed []Change, err error) {
	if m := SavedMethod(saved); m != cur.Method() {
		if m == "" {
			m = "an unknown method"
		}
		return nil, nil, fmt.Errorf("%s: the checkpoint was trained by %s, this run is %s", name, m, cur.Method())
	}
	old := cur.Default()
	if err := Load(name, saved, old); err != nil {
		return nil, nil, err
	}
	override := cur.Common().ResumeOverride
	if slices.Contains(override, OverrideAll) {
		return nil, nil, nil
	}
	was := map[string]field{}
	for _, f := range fields(old) {
		was[f.Key] = f
	}
	for _, f := range fields(cur) {
		o := was[f.Key]
		if f.Resume != "" || reflect.DeepEqual(o.Value.Interface(), f.Value.Interface()) {
			continue
		}
		// A run on another number of devices with the same global sizes (per device × devices:
		// the micro-batch, PPO's rollout forward pass) takes the same steps over the same
		// examples, drawn in the same passes; a change of a per-device size alone is a change of
		// the global one.
		if perDevice[f.Key] && sameGlobalSizes(old, cur) {
			continue
		}
		c := Change{Key: f.Key, Flag: f.Flag, Saved: scalar(o.Value.Interface()), Now: scalar(f.Value.Interface())}
		if f.Key == "devices" { // a resolved one-device run stores 0 (ResolveDevices): say 1
			for _, v := range []*string{&c.Saved, &c.Now} {
				if *v == "0" {
					*v = "1"
				}
			}
		}
		if slices.Contains(override, f.Key) {
			allowed = append(allowed, c)
		} else {
			refused = append(refused, c)
		}
	}
	return refused, allowed, nil
}

// perDevice are the options whose global size is their value × devices.
var perDevice = map[string]bool{"devices": true, "per_device_train_batch_size": true, "local_rollout_forward_batch_size": true}

// sameGlobalSizes reports whether a and b (one method's) have the same global micro-batch and,
// for PPO, the same rollout forward pass.
func sameGlobalSizes(a, b Config) bool {
	if a.Common().MicroBatch() != b.Common().MicroBatch() {
		return false
	}
	// PPO's rollout forward pass (ppo.Config.ForwardRows).
	type forwardRows interface{ ForwardRows() int }
	if pa, ok := a.(forwardRows); ok {
		pb, ok := b.(forwardRows)
		return ok && pa.ForwardRows() == pb.ForwardRows()
	}
	return true
}

// scalar formats v as YAML does in one line (a list in flow style).
func scalar(v any) string {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	if n.Kind == yaml.SequenceNode {
		n.Style = yaml.FlowStyle
	}
	if enc.Encode(n) != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(buf.String())
}

// validateOverride checks that resume_override names options of the method (or all).
func validateOverride(c Config) error {
	keys := Keys(c)
	for _, k := range c.Common().ResumeOverride {
		if k != OverrideAll && !slices.Contains(keys, k) {
			return Bad(c, "resume_override", fmt.Sprintf("names %q, which is not a %s option%s", k, c.Method(), suggest(k, fields(c))))
		}
	}
	return nil
}

// MarshalRun is Marshal of cfg without the options that only say where and how this invocation
// started (output_dir, resume, resume_from_checkpoint, overwrite_output_dir, resume_override):
// what a checkpoint keeps as its training_args.yaml, so that a checkpoint is the same wherever the
// run wrote it and however often it was resumed (a resumed run writes the same bytes as a straight
// one).
func MarshalRun(cfg Config) ([]byte, error) {
	v := reflect.New(reflect.TypeOf(cfg).Elem())
	v.Elem().Set(reflect.ValueOf(cfg).Elem())
	run := v.Interface().(Config)
	t := run.Common()
	t.OutputDir, t.Resume, t.ResumeFromCheckpoint, t.OverwriteOutputDir, t.ResumeOverride = "", false, "", false, nil
	return Marshal(run)
}
