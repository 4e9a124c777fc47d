package loop

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/internal/checkpoint"
	"github.com/posttrain/posttrain/trainers/engine/config"
)

// Fingerprint keys of trainer_state.json's fingerprints: what the run read, by content.
const (
	fpModel   = "model_name_or_path"
	fpDataset = "dataset_name"
)

// fingerprints identifies the run's inputs by content, so that a resume can check it reads the
// same model and dataset even when their paths changed: the dataset file's SHA-256 (a registered
// source: its name, since it is generated from its name), and a SHA-256 over the model
// directory's config.json, tokenizer files, and safetensors headers, sizes and weight samples
// (hashSafetensors: without reading gigabytes).
func (d *driver) fingerprints() (map[string]string, error) {
	fp := map[string]string{}
	if d.m.Dir != "" {
		h, err := modelFingerprint(d.m.Dir)
		if err != nil {
			return nil, fmt.Errorf("fingerprint model %s: %w", d.m.Dir, err)
		}
		fp[fpModel] = h
	}
	if d.cfg.Dataset != "" {
		h, err := fileFingerprint(d.cfg.Dataset)
		if err != nil {
			return nil, fmt.Errorf("fingerprint dataset %s: %w", d.cfg.Dataset, err)
		}
		fp[fpDataset] = h
	}
	if len(d.cfg.Datasets) > 0 { // a mixture: each entry's data, in order
		var hs []string
		for _, e := range d.cfg.Datasets {
			h, err := fileFingerprint(e.Path)
			if err != nil {
				return nil, fmt.Errorf("fingerprint dataset %s: %w", e.Path, err)
			}
			hs = append(hs, h)
		}
		fp[fpDataset] = "mixture:" + strings.Join(hs, ",")
	}
	return fp, nil
}

// fileFingerprint is "sha256:HEX" of a file's bytes, or of a dataset directory's files (each
// one's path, size and bytes, in path order; hidden ones left out), or "source:NAME" for a name
// that is no file (a registered dataset source).
func fileFingerprint(path string) (string, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(path, "/.") {
		return "source:" + path, nil
	}
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if !st.IsDir() {
		if err := hashFile(h, path); err != nil {
			return "", err
		}
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	err = filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != path && strings.HasPrefix(e.Name(), ".") {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(path, p)
		info, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(rel), info.Size())
		return hashFile(h, p)
	})
	if err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

func hashFile(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(h, f)
	return err
}

// modelFingerprint hashes the model directory's small files whole and each *.safetensors file's
// size, header and weight samples.
func modelFingerprint(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, e := range entries { // ReadDir sorts by name
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case !e.Type().IsRegular():
			continue
		case strings.HasSuffix(name, ".safetensors"):
			if err := hashSafetensors(h, path); err != nil {
				return "", err
			}
		case slices.Contains([]string{"config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "model.safetensors.index.json"}, name):
			data, err := os.ReadFile(path)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(h, "%s %d\n", name, len(data))
			h.Write(data)
		}
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// Weight samples of a safetensors file's fingerprint: sampleCount chunks of sampleBytes, evenly
// spaced over the data. A different fine-tune of the same architecture changes every tensor, so
// samples tell checkpoints apart without reading gigabytes at every start.
const (
	sampleCount = 256
	sampleBytes = 4096
)

// hashSafetensors adds a safetensors file's name, size, JSON header (names, dtypes, shapes,
// offsets) and weight samples to h.
func hashSafetensors(h io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	fmt.Fprintf(h, "%s %d\n", filepath.Base(path), fi.Size())
	var n [8]byte
	if _, err := io.ReadFull(f, n[:]); err != nil {
		return fmt.Errorf("%s: safetensors header: %w", path, err)
	}
	size := binary.LittleEndian.Uint64(n[:])
	if size > uint64(fi.Size())-8 {
		return fmt.Errorf("%s: safetensors header length %d exceeds the file", path, size)
	}
	if _, err := io.CopyN(h, f, int64(size)); err != nil {
		return err
	}
	start := 8 + int64(size)
	span := fi.Size() - start
	buf := make([]byte, sampleBytes)
	for i := range int64(sampleCount) {
		off := start + span*i/sampleCount
		k, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		h.Write(buf[:k])
	}
	return nil
}

// checkResume compares the checkpoint with this run before anything is loaded from it: the same
// method; the same value of every option that changes the training trajectory (method options,
// batch sizes, accumulation, learning rate and schedule, seed, max_steps, ...) as the checkpoint's
// training_args.yaml; and the same model and dataset contents. A difference is an error naming the
// options, unless resume_override lists them (then each is logged as a warning).
func (d *driver) checkResume(dir string, st *checkpoint.State) error {
	override := d.cfg.ResumeOverride
	if st.Method != "" && st.Method != d.opts.Config.Method() {
		return fmt.Errorf("%s: the checkpoint was trained by %s, this run is %s", filepath.Join(dir, checkpoint.StateName), st.Method, d.opts.Config.Method())
	}
	if slices.Contains(override, config.OverrideAll) {
		d.logger.Warn("resume: resume_override all: the checkpoint's arguments, model and dataset are not compared with this run's", "checkpoint", dir)
		return nil
	}
	path := filepath.Join(dir, config.ResolvedName)
	saved, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%s is missing, so this run's arguments cannot be compared with the checkpoint's; pass --resume-override all to resume without the check", path)
	}
	refused, allowed, err := config.ResumeChanges(saved, path, d.opts.Config)
	if err != nil {
		return err
	}
	now := d.fps
	for _, key := range []string{fpModel, fpDataset} {
		was, ok := st.Fingerprints[key]
		if !ok || was == now[key] {
			continue
		}
		c := config.Change{Key: key, Flag: "--" + strings.ReplaceAll(key, "_", "-"), Saved: "content " + short(was), Now: "content " + short(now[key])}
		if slices.Contains(override, key) {
			allowed = append(allowed, c)
		} else {
			refused = append(refused, c)
		}
	}
	for _, c := range allowed {
		d.logger.Warn("resume: overridden", "option", c.Key, "checkpoint", c.Saved, "now", c.Now)
	}
	if len(refused) == 0 {
		return nil
	}
	parts := make([]string, len(refused))
	keys := make([]string, len(refused))
	for i, c := range refused {
		parts[i], keys[i] = c.String(), c.Key
	}
	return fmt.Errorf("this run differs from the checkpoint in what changes the training trajectory: %s (checkpoint → now); resume with the checkpoint's values (its %s), or pass --resume-override %s to continue with the new ones",
		strings.Join(parts, "; "), config.ResolvedName, strings.Join(keys, ","))
}

// short abbreviates a fingerprint for messages.
func short(fp string) string {
	if i := strings.IndexByte(fp, ':'); i >= 0 && len(fp) > i+13 {
		return fp[:i+13]
	}
	return fp
}
