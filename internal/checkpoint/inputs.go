package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Input is a path a command reads, with the name the user knows it by: "model_name_or_path
// (--model)".
type Input struct {
	Name, Path string
}

// CheckOutside refuses an output directory (out, known to the user as what: "output_dir",
// "--out") that is or contains one of inputs, whatever removing or replacing it would then do:
// both are resolved to real paths first (symbolic links followed, ".." resolved), so no spelling of
// the same place gets through. Inputs that do not exist on disk (a Hub id) are not checked.
func CheckOutside(what, out string, inputs []Input) error {
	if out == "" {
		return nil
	}
	o, err := realPath(out)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, out, err)
	}
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		if _, err := os.Lstat(in.Path); err != nil {
			continue
		}
		p, err := realPath(in.Path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", in.Name, in.Path, err)
		}
		switch rel, err := filepath.Rel(o, p); {
		case err != nil:
		case rel == ".":
			return fmt.Errorf("%s %s is %s, which this command reads: choose another %s", what, out, in.Name, what)
		case rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)):
			return fmt.Errorf("%s %s contains %s %s, which this command reads: choose another %s", what, out, in.Name, in.Path, what)
		}
	}
	return nil
}

// realPath is path made absolute with every symbolic link resolved; the part that does not exist
// yet is kept as written (cleaned).
func realPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for p := abs; ; p = filepath.Dir(p) {
		r, err := filepath.EvalSymlinks(p)
		if err == nil {
			return filepath.Join(r, rest), nil
		}
		if !errors.Is(err, fs.ErrNotExist) || filepath.Dir(p) == p {
			return "", err
		}
		rest = filepath.Join(filepath.Base(p), rest)
	}
}

// CheckFileOutside refuses an output file (out, known to the user as what: "--out") that is one of
// inputs, contains one (a directory), or lies inside an input directory, where writing it would
// replace or add to what the command reads (`--out MODEL/model.safetensors`). Paths are resolved
// as CheckOutside resolves them.
func CheckFileOutside(what, out string, inputs []Input) error {
	if err := CheckOutside(what, out, inputs); err != nil {
		return err
	}
	o, err := realPath(out)
	if err != nil {
		return fmt.Errorf("%s %s: %w", what, out, err)
	}
	for _, in := range inputs {
		if in.Path == "" {
			continue
		}
		st, err := os.Stat(in.Path)
		if err != nil || !st.IsDir() {
			continue
		}
		p, err := realPath(in.Path)
		if err != nil {
			return fmt.Errorf("%s %s: %w", in.Name, in.Path, err)
		}
		if rel, err := filepath.Rel(p, o); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return fmt.Errorf("%s %s is inside %s %s, which this command reads: choose a path outside it", what, out, in.Name, in.Path)
		}
	}
	return nil
}
