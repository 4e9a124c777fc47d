package checkpoint

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Hidden-name prefixes of the temporaries a run makes in its output directory: a checkpoint being
// written (.checkpoint-N.tmp-XXXX, and .checkpoint-N.tmp-XXXX.old while it replaces one), the
// model being written (.model-XXXX, by trainers/engine/loop) and a checkpoint being rotated out
// (.deleting-checkpoint-N).
const (
	tmpPrefix      = "." + Prefix
	ModelTmpPrefix = ".model-"
	deletingPrefix = ".deleting-" + Prefix
)

// Run describes what a training run writes at the top of its output directory besides its
// checkpoint-N directories, as filepath.Match patterns of names. Start uses it to tell a previous
// run, to remove one (overwrite_output_dir) and to find stale temporaries; nothing else in the
// directory is ever touched.
type Run struct {
	Files []string // the logs and configuration a run writes (metrics.jsonl, training_args.yaml, runs/, ...)
	Marks []string // the Files that, when not empty, show that a run was there (metrics.jsonl, ...)
	// Model are the names a final model's files may have (weights, configs, tokenizer, card). A
	// run writes them with WriteModelFiles, which lists them in ModelMark; such a file that is not
	// listed belongs to a model posttrain did not write, and the run refuses the directory rather
	// than replace it.
	Model []string
}

// Start readies outputDir for a run (whose lock the caller holds): it refuses a directory holding
// a model posttrain did not write (Foreign), removes the temporaries a killed run left (logging
// their names), then, unless the run resumes, refuses a directory that holds a previous run (a
// checkpoint-N directory, a non-empty mark file, a finished model) or, with overwrite, removes
// that run's files and checkpoints first (Owned). A missing or empty directory just works.
func (r Run) Start(outputDir string, resume, overwrite bool, logger *slog.Logger) error {
	if err := r.checkForeign(outputDir); err != nil {
		return err
	}
	stale, err := r.Stale(outputDir)
	if err != nil {
		return err
	}
	if len(stale) > 0 {
		if err := removeAll(outputDir, stale); err != nil {
			return err
		}
		logger.Warn("removed the temporaries of an interrupted run", "output_dir", outputDir, "removed", strings.Join(stale, " "))
	}
	if resume {
		return nil
	}
	prev, err := r.Previous(outputDir)
	if err != nil || len(prev) == 0 {
		return err
	}
	if !overwrite {
		return previousRun(outputDir, prev)
	}
	files, err := r.Owned(outputDir)
	if err != nil {
		return err
	}
	if err := removeAll(outputDir, files); err != nil {
		return err
	}
	logger.Warn("overwrite_output_dir: removed the previous run", "output_dir", outputDir, "removed", strings.Join(files, " "))
	return nil
}

// Check is Start's refusals without touching anything (for a check before the expensive setup):
// a model posttrain did not write, and a previous run when the run neither resumes nor
// overwrites it.
func (r Run) Check(outputDir string, resume, overwrite bool) error {
	if err := r.checkForeign(outputDir); err != nil {
		return err
	}
	if resume || overwrite {
		return nil
	}
	prev, err := r.Previous(outputDir)
	if err != nil || len(prev) == 0 {
		return err
	}
	return previousRun(outputDir, prev)
}

func previousRun(outputDir string, prev []string) error {
	return fmt.Errorf("output_dir %s holds a previous run (%s): continue it with --resume, or remove it with --overwrite-output-dir", outputDir, brief(prev))
}

// checkForeign refuses an output directory holding model files posttrain did not write.
func (r Run) checkForeign(outputDir string) error {
	foreign, err := ForeignModel(outputDir, r.Model)
	if err != nil {
		return fmt.Errorf("output_dir: %w", err)
	}
	if len(foreign) > 0 {
		return fmt.Errorf("output_dir %s holds %s, which posttrain did not write (%s does not list them) and the final model would replace: choose another output_dir", outputDir, brief(foreign), ModelMark)
	}
	return nil
}

// brief lists the first names and how many more.
func brief(names []string) string {
	const n = 3
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// Previous returns the entries of outputDir that show a previous run: checkpoint-N directories
// (complete or not), non-empty mark files and a model a run wrote (ModelMark, or the marker of
// one being written). A missing directory has none.
func (r Run) Previous(outputDir string) ([]string, error) {
	return entriesWhere(outputDir, func(e os.DirEntry) bool {
		if _, ok := stepOf(e.Name()); ok && e.IsDir() {
			return true
		}
		if e.Name() == ModelMark || e.Name() == IncompleteMarker {
			return true
		}
		if !e.Type().IsRegular() || !match(r.Marks, e.Name()) {
			return false
		}
		fi, err := e.Info()
		return err == nil && fi.Size() > 0
	})
}

// Owned returns the entries of outputDir that a run wrote: checkpoint-N directories, the Files,
// the temporaries (Stale), and the model files its ModelMark lists with the mark itself. A missing
// directory has none.
func (r Run) Owned(outputDir string) ([]string, error) {
	model, _, err := ReadModelMark(outputDir)
	if err != nil {
		return nil, fmt.Errorf("output_dir: %w", err)
	}
	return entriesWhere(outputDir, func(e os.DirEntry) bool {
		n := e.Name()
		_, ck := stepOf(n)
		return (ck && e.IsDir()) || match(r.Files, n) || r.stale(n) || slices.Contains(model, n) ||
			n == ModelMark || n == IncompleteMarker
	})
}

// Stale returns the temporaries in outputDir that only a killed run leaves behind: .checkpoint-*
// (a checkpoint being saved), .deleting-checkpoint-* (one being rotated out), .model-* (the model
// being written) and F.tmp, .F.tmp, .F.tmp.old, .F.tmp-* of the Files (written then renamed).
func (r Run) Stale(outputDir string) ([]string, error) {
	return entriesWhere(outputDir, func(e os.DirEntry) bool { return r.stale(e.Name()) })
}

// entriesWhere lists the names of dir's entries that keep accepts; a missing dir has none.
func entriesWhere(dir string, keep func(os.DirEntry) bool) ([]string, error) {
	entries, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if keep(e) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func (r Run) stale(name string) bool {
	if name == ModelMark+".tmp" {
		return true
	}
	for _, p := range []string{tmpPrefix, deletingPrefix, ModelTmpPrefix} {
		if strings.HasPrefix(name, p) && len(name) > len(p) {
			return true
		}
	}
	base, _ := strings.CutSuffix(name, ".old")
	if i := strings.LastIndex(base, ".tmp"); i > 0 {
		rest := base[i+len(".tmp"):]
		if rest == "" || strings.HasPrefix(rest, "-") {
			f := base[:i]
			files := append(slices.Clone(r.Files), r.Model...)
			if hidden, ok := strings.CutPrefix(f, "."); ok {
				return match(files, hidden)
			}
			return base == name && rest == "" && match(files, f)
		}
	}
	return false
}

func match(patterns []string, name string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool {
		ok, err := filepath.Match(p, name)
		return ok && err == nil
	})
}

func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("output_dir: %w", err)
	}
	return entries, nil
}

func removeAll(dir string, names []string) error {
	for _, n := range names {
		if err := os.RemoveAll(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("output_dir: %w", err)
		}
	}
	return nil
}
