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

// Save writes OUTPUT_DIR/checkpoint-<st.GlobalStep>/ atomically: every file of files (name →
// writer, names relative to the checkpoint and not trainer_state.json) and trainer_state.json are
// written into OUTPUT_DIR/.checkpoint-N.tmp-XXXX, fsynced, and the directory renamed into place
// (replacing an existing checkpoint-N). Then the oldest checkpoints beyond saveTotalLimit are
// pruned (≤ 0 keeps all). It returns the checkpoint directory; on error nothing is left behind.
// IncompleteMarker is the file a run keeps in its output directory while WriteFiles replaces the
// final model's files there one by one: a run killed meanwhile leaves it, and the weights may then
// be a mix of two models. models/safetensors refuses to read a directory that holds it (its
// safetensors.IncompleteMarker is the same name, which TestIncompleteMarker_SameAsSafetensors
// holds; this package sits below models/ and does not import it).
const IncompleteMarker = ".posttrain-model-incomplete"

func Save(outputDir string, st *State, files map[string]WriteFunc, saveTotalLimit int) (string, error) {
	final := Dir(outputDir, st.GlobalStep)
	if err := os.MkdirAll(outputDir, 0o755); err != nil {
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	removeStale(outputDir)
	base := Prefix + fmt.Sprint(st.GlobalStep)
	tmp, err := fsmode.MkdirTemp(outputDir, "."+base+".tmp-")
	if err != nil {
		return "", fmt.Errorf("save checkpoint: %w", err)
	}
	Fault(PhaseSaveTempCreated)
	if err := fill(tmp, st, files); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("save %s: %w", final, err)
	}
	Fault(PhaseSaveSynced)
	if err := replaceDir(tmp, final); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("save %s: %w", final, err)
	}
	Fault(PhaseSaveRenamed)
	if err := syncPath(outputDir); err != nil {
		return "", fmt.Errorf("save %s: %w", final, err)
	}
	if err := Prune(outputDir, saveTotalLimit, final); err != nil {
		return final, err
	}
	return final, nil
}

// fill writes the files and trainer_state.json into dir and fsyncs everything under it.
func fill(dir string, st *State, files map[string]WriteFunc) error {
	names := slices.Sorted(maps.Keys(files))
	for _, name := range names {
		if err := checkName(name); err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := files[name](path); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		if _, err := os.Lstat(path); err != nil {
			return fmt.Errorf("write %s: the writer created no file", name)
		}
		Fault(PhaseSaveFileWritten)
	}
	saved := *st
	saved.Files = names
	saved.Sizes = make(map[string]int64, len(names))
	for _, name := range names {
		n, err := size(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		saved.Sizes[name] = n
	}
	data, err := json.MarshalIndent(&saved, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", StateName, err)
	}
	if err := os.WriteFile(filepath.Join(dir, StateName), append(data, '\n'), 0o644); err != nil {
		return err
	}
	Fault(PhaseSaveStateWritten)
	return syncTree(dir)
}

func checkName(name string) error {
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(name)))
	if name == "" || clean != name || filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") || name == StateName {
		return fmt.Errorf("invalid checkpoint file name %q", name)
	}
	return nil
}

// replaceDir renames tmp to final; an existing final is moved aside first and removed after.
func replaceDir(tmp, final string) error {
	if _, err := os.Stat(final); err != nil {
		return os.Rename(tmp, final)
	}
	old := tmp + ".old"
	if err := os.Rename(final, old); err != nil {
		return err
	}
	Fault(PhaseReplaceMovedAside)
	if err := os.Rename(tmp, final); err != nil {
		os.Rename(old, final) // put the previous one back
		return err
	}
	return os.RemoveAll(old)
}

// removeStale deletes temporary directories left by a crashed Save.
func removeStale(outputDir string) {
	entries, _ := os.ReadDir(outputDir)
	for _, e := range entries {
		if n := e.Name(); e.IsDir() && strings.HasPrefix(n, "."+Prefix) && strings.Contains(n, ".tmp-") {
			os.RemoveAll(filepath.Join(outputDir, n))
		}
	}
}

// syncTree fsyncs every regular file and directory under root (root included).
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() || d.IsDir() {
			return syncPath(path)
		}
		return nil
	})
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	serr := f.Sync()
	return errors.Join(serr, f.Close())
}

// WriteFiles writes files (name → writer) into dir, each under a temporary name first, fsynced and
// renamed into place: for the final model in OUTPUT_DIR itself, as HF Trainer leaves it. A file
// that fails leaves the previous version of that file in place. Since the files are replaced one by
// one, a kill between two renames leaves a mix of old and new files (shards of two models): before
// the first rename dir gets the marker file IncompleteMarker (fsynced), removed after
// the last one, and loading a model directory that holds it fails naming it.
func WriteFiles(dir string, files map[string]WriteFunc) error { return writeFiles(dir, files, nil) }

// writeFiles is WriteFiles that also removes the entries named in remove after the last rename,
// while the marker stands.
func writeFiles(dir string, files map[string]WriteFunc, remove []string) error {
	marker := filepath.Join(dir, IncompleteMarker)
	marked := false
	mark := func() error {
		if marked {
			return nil
		}
		if err := writeMarker(marker); err != nil {
			return err
		}
		marked = true
		Fault(PhaseModelMarked)
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := checkName(name); err != nil {
			return err
		}
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
		tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
		os.RemoveAll(tmp)
		err := files[name](tmp)
		if err == nil {
			err = syncTree(tmp)
		}
		if err == nil {
			Fault(PhaseModelTempWritten)
			err = mark()
		}
		if err == nil {
			err = replacePath(tmp, path)
		}
		if err != nil {
			os.RemoveAll(tmp)
			return fmt.Errorf("write %s: %w", path, err)
		}
		Fault(PhaseModelRenamed)
	}
	if len(remove) > 0 {
		if err := mark(); err != nil {
			return fmt.Errorf("write %s: %w", dir, err)
		}
		if err := removeAll(dir, remove); err != nil {
			return err
		}
	}
	if err := syncPath(dir); err != nil {
		return err
	}
	if !marked {
		return nil
	}
	if err := os.Remove(marker); err != nil {
		return fmt.Errorf("write %s: %w", dir, err)
	}
	if err := syncPath(dir); err != nil {
		return err
	}
	Fault(PhaseModelUnmarked)
	return nil
}

// writeMarker writes the incomplete-model marker at path and makes it durable (file and directory)
// before any file of the model is replaced.
func writeMarker(path string) error {
	text := "posttrain is replacing the model files of this directory one by one; while this file exists\n" +
		"they may be a mix of two versions: use the latest checkpoint-N, or rerun the training with --resume\n"
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Sync()
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	return syncPath(filepath.Dir(path))
}

// replacePath renames tmp to path; a directory at path is replaced (rename cannot overwrite one).
func replacePath(tmp, path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return replaceDir(tmp, path)
	}
	return os.Rename(tmp, path)
}
