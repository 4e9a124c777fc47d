package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/posttrain/posttrain/internal/fsmode"
)

// ModelMark is the file posttrain writes into every model directory it writes (init, merge, a
// run's final model): the names of that model's files. Replacing the model later (--overwrite,
// overwrite_output_dir) removes exactly those, never a file the user put beside them; a directory
// without it holds nothing posttrain may replace.
const ModelMark = ".posttrain-model.json"

// modelMark is ModelMark's content.
type modelMark struct {
	WrittenBy string   `json:"written_by"` // the command: "posttrain init", "posttrain sft", ...
	Files     []string `json:"files"`      // top-level names, sorted
}

// ReadModelMark returns the files of the model posttrain wrote into dir, and whether dir has a
// ModelMark at all.
func ReadModelMark(dir string) ([]string, bool, error) {
	path := filepath.Join(dir, ModelMark)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var m modelMark
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	for _, name := range m.Files {
		if name == "" || name != filepath.Base(name) || name == "." || name == ".." {
			return nil, false, fmt.Errorf("%s: invalid file name %q", path, name)
		}
	}
	return m.Files, true, nil
}

// writeModelMark writes dir's ModelMark atomically (a temporary renamed into place, fsynced).
func writeModelMark(dir, by string, files []string) error {
	data, err := json.MarshalIndent(modelMark{WrittenBy: by, Files: files}, "", "  ")
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ModelMark)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncPath(dir)
}

// WriteModelFiles replaces the model in dir (a run's OUTPUT_DIR, or a model directory posttrain
// wrote) by files, as WriteFiles does, and records them in ModelMark: the files of the model it
// replaces that the new one lacks (say the shards of a larger one) are removed while the
// incomplete-model marker stands, and nothing else in dir is touched. The mark lists the old and
// new files together until the last rename, so a kill in between leaves every file that may be a
// model's listed.
func WriteModelFiles(dir, by string, files map[string]WriteFunc) error {
	old, _, err := ReadModelMark(dir)
	if err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(files))
	var gone []string
	for _, n := range old {
		if !slices.Contains(names, n) {
			gone = append(gone, n)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := writeModelMark(dir, by, slices.Sorted(slices.Values(append(slices.Clone(names), gone...)))); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := writeFiles(dir, files, gone); err != nil {
		return err
	}
	if err := writeModelMark(dir, by, names); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	return nil
}

// WriteModel writes a model into dir for a command that makes one (init, merge): fill writes the
// model's files into an empty directory. dir must be missing or empty, or hold a model posttrain
// wrote (ModelMark) and overwrite be set: then only that model's files are replaced
// (WriteModelFiles). Anything else is refused in one line naming what dir holds, and so is a
// directory a live run holds (Lock). A missing dir is written whole under a temporary name and
// renamed into place.
func WriteModel(dir, by string, overwrite bool, fill func(tmp string) error) error {
	dir = filepath.Clean(dir)
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return writeNewDir(dir, by, fill)
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is a file, not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var there []string
	for _, e := range entries {
		if e.Name() != LockName {
			there = append(there, e.Name())
		}
	}
	if len(there) > 0 {
		files, marked, err := ReadModelMark(dir)
		if err != nil {
			return err
		}
		if !marked {
			return fmt.Errorf("%s is not empty (%s) and holds no model posttrain wrote (no %s): choose a new or empty directory", dir, brief(there), ModelMark)
		}
		if !overwrite {
			return fmt.Errorf("%s holds a model posttrain wrote (%s): replace it with --overwrite (only those files are replaced), or choose a new directory", dir, brief(files))
		}
		if err := CheckUnlocked(dir); err != nil {
			return err
		}
	}
	for _, name := range there {
		if strings.HasPrefix(name, ModelTmpPrefix) { // a killed writer's
			os.RemoveAll(filepath.Join(dir, name))
		}
	}
	tmp, err := fsmode.MkdirTemp(dir, ModelTmpPrefix)
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if err := fill(tmp); err != nil {
		return err
	}
	made, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	files := map[string]WriteFunc{}
	for _, e := range made {
		src := filepath.Join(tmp, e.Name())
		files[e.Name()] = func(path string) error { return os.Rename(src, path) }
	}
	return WriteModelFiles(dir, by, files)
}

// writeNewDir fills a temporary directory beside dir, marks it and renames it to dir.
func writeNewDir(dir, by string, fill func(tmp string) error) (err error) {
	parent, base := filepath.Split(dir)
	if parent == "" {
		parent = "."
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := fsmode.MkdirTemp(parent, "."+base+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()
	if err := fill(tmp); err != nil {
		return err
	}
	made, err := os.ReadDir(tmp)
	if err != nil {
		return err
	}
	names := make([]string, len(made))
	for i, e := range made {
		names[i] = e.Name()
	}
	if err := writeModelMark(tmp, by, names); err != nil {
		return err
	}
	if err := syncTree(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return syncPath(parent)
}

// ForeignModel returns the entries of dir that look like a model's files (patterns) but are not
// listed in its ModelMark: a model posttrain did not write, which a run must not replace.
func ForeignModel(dir string, patterns []string) ([]string, error) {
	listed, _, err := ReadModelMark(dir)
	if err != nil {
		return nil, err
	}
	return entriesWhere(dir, func(e os.DirEntry) bool {
		return match(patterns, e.Name()) && !slices.Contains(listed, e.Name())
	})
}
