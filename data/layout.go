package data

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// A dataset directory is read as `datasets.load_dataset(dir, name=config, split=split)` reads it:
//
//   - datasets' save_to_disk output: a Dataset (state.json, data-*.arrow), whose rows are the
//     "train" split, or a DatasetDict (dataset_dict.json, one such directory per split);
//   - a Hub repository's layout: the data_files of README.md's `configs:` (the config named by
//     --dataset-config, else the one marked default, else "default"), or, with no configs, the
//     data files named after their split (train.jsonl, data/train-00000-of-00001.parquet,
//     test/…; datasets' default split patterns), else every data file as "train".
//
// A split may carry a slice, as datasets' split strings do: train[:1000], train[10:20],
// train[-100:], train[:10%], and splits join with '+': train+test.

// dataExtensions are the data files a directory's splits are made of, as datasets' packaged
// builders read them.
var dataExtensions = []string{".parquet", ".arrow", ".jsonl", ".json", ".csv", ".jsonl.gz", ".json.gz", ".csv.gz"}

// IsDataFile reports whether a file name is a data file posttrain reads in a dataset directory
// (by its extension; hidden files are not).
func IsDataFile(name string) bool {
	base := strings.ToLower(path.Base(filepath.ToSlash(name)))
	if strings.HasPrefix(base, ".") {
		return false
	}
	for _, ext := range dataExtensions {
		if strings.HasSuffix(base, ext) {
			return true
		}
	}
	return false
}

// splitKeywords are datasets' split name synonyms in file and directory names
// (data_files.py: SPLIT_KEYWORDS).
var splitKeywords = map[string][]string{
	"train":      {"train", "training"},
	"validation": {"validation", "valid", "dev", "val"},
	"test":       {"test", "testing", "eval", "evaluation"},
}

// readSplits reads the split expression of the dataset at path (a file or a directory).
func readSplits(p string, o ReadOptions) (*Dataset, error) {
	parts, err := parseSplit(o.Split)
	if err != nil {
		return nil, err
	}
	var out *Dataset
	for _, part := range parts {
		files, err := splitPaths(p, o, part.name)
		if err != nil {
			return nil, err
		}
		po := o
		if po.win = part.head(); po.win == nil && (part.from != nil || part.to != nil) {
			if po.win, err = countedWindow(files, part, p); err != nil {
				return nil, err
			}
		}
		// A slice of a split whose rows could not be counted first (a malformed file, which the
		// read then reports) is cut from the whole split's rows: a streamed one is kept, cut,
		// then handed over.
		each := po.each
		cutKept := each != nil && po.win == nil && (part.from != nil || part.to != nil)
		if cutKept {
			po.each = nil
		}
		d, err := readSplit(p, files, po)
		if err != nil {
			return nil, err
		}
		if po.win == nil {
			if d.Rows, err = part.slice(d.Rows, p); err != nil {
				return nil, err
			}
		}
		if cutKept {
			for _, r := range d.Rows {
				if err := each(r); err != nil {
					return nil, err
				}
			}
			d.streamed, d.Rows = len(d.Rows), nil
		}
		if out == nil || out.Len() == 0 {
			out = d
			continue
		}
		if d.Len() == 0 {
			continue
		}
		if d.Format != out.Format {
			return nil, fmt.Errorf("%s: split %s holds %s rows, %s holds %s", p, part.name, d.Format, parts[0].name, out.Format)
		}
		out.appendRows(d)
	}
	return checked(out)
}

// readSplit reads the files of one split of the dataset at p (splitPaths): all their rows, or
// those of o's window.
func readSplit(p string, files []string, o ReadOptions) (*Dataset, error) {
	var out *Dataset
	for _, f := range files {
		if o.win.full() {
			break
		}
		d, err := readFile(f, o)
		if err != nil {
			return nil, err
		}
		if out == nil || out.Len() == 0 { // a file before a slice's window gives no rows
			out = d
			out.Path = p
			continue
		}
		if d.Len() == 0 {
			continue
		}
		if d.Format != out.Format {
			return nil, fmt.Errorf("%s: %s holds %s rows, %s holds %s", p, f, d.Format, files[0], out.Format)
		}
		if o.Format == FormatAuto {
			o.Format = out.Format
		}
		out.appendRows(d)
	}
	return out, nil
}

// splitPaths lists the data files of a split of the dataset at p, in order: p itself for a file.
func splitPaths(p string, o ReadOptions, split string) ([]string, error) {
	st, err := os.Stat(p)
	if err != nil {
		return nil, fmt.Errorf("read dataset: %w", err)
	}
	if !st.IsDir() {
		if split != "train" {
			return nil, fmt.Errorf("%s: a single file is the split \"train\", not %q (dataset_train_split / dataset_test_split)", p, split)
		}
		if o.Config != "" {
			return nil, fmt.Errorf("%s: a single file has no configs (dataset_config %q)", p, o.Config)
		}
		return []string{p}, nil
	}
	return splitFiles(p, o.Config, split)
}

// splitFiles lists the data files of a split of the dataset directory dir, in order.
func splitFiles(dir, config, split string) ([]string, error) {
	if isFile(filepath.Join(dir, "dataset_dict.json")) { // save_to_disk of a DatasetDict
		var dd struct {
			Splits []string `json:"splits"`
		}
		if err := readJSON(filepath.Join(dir, "dataset_dict.json"), &dd); err != nil {
			return nil, err
		}
		if !slices.Contains(dd.Splits, split) {
			return nil, fmt.Errorf("%s: no split %q (it has %s)", dir, split, strings.Join(dd.Splits, ", "))
		}
		return savedFiles(filepath.Join(dir, split))
	}
	if isFile(filepath.Join(dir, "state.json")) { // save_to_disk of one Dataset: the train split
		if split != "train" {
			return nil, fmt.Errorf("%s: a saved Dataset (save_to_disk) is the split \"train\", not %q", dir, split)
		}
		return savedFiles(dir)
	}
	all, err := dataFiles(dir)
	if err != nil {
		return nil, err
	}
	configs, err := readmeConfigs(dir)
	if err != nil {
		return nil, err
	}
	rel, err := selectSplit(dir, all, configs, config, split)
	if err != nil {
		return nil, err
	}
	files := make([]string, len(rel))
	for i, f := range rel {
		files[i] = filepath.Join(dir, filepath.FromSlash(f))
	}
	return files, nil
}

// selectSplit picks, of a dataset's data files all (slash-separated, relative to its root, sorted),
// those of split in config: by configs (README.md's) where there are any, else by the split a
// file's path names (fileSplit). dir names the dataset in errors.
func selectSplit(dir string, all []string, configs []hubConfig, config, split string) ([]string, error) {
	if len(configs) > 0 {
		c, err := pickConfig(dir, configs, config)
		if err != nil {
			return nil, err
		}
		var splits []string
		for _, df := range c.DataFiles {
			splits = append(splits, df.Split)
			if df.Split != split {
				continue
			}
			var files []string
			for _, pat := range df.Paths {
				for _, f := range all {
					if ok, _ := path.Match(pat, f); ok || matchDoubleStar(pat, f) {
						files = append(files, f)
					}
				}
			}
			if len(files) == 0 {
				return nil, fmt.Errorf("%s: config %s, split %s: no file matches %s", dir, c.Name, split, strings.Join(df.Paths, ", "))
			}
			return files, nil
		}
		return nil, fmt.Errorf("%s: config %s has no split %q (it has %s)", dir, c.Name, split, strings.Join(splits, ", "))
	}
	if config != "" && config != "default" {
		return nil, fmt.Errorf("%s: no config %q: its README.md lists no configs", dir, config)
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no data files (%s)", dir, strings.Join(dataExtensions, ", "))
	}
	bySplit := map[string][]string{}
	for _, f := range all {
		if s := fileSplit(f); s != "" {
			bySplit[s] = append(bySplit[s], f)
		}
	}
	if len(bySplit) == 0 { // no file names a split: all of them are "train"
		if split != "train" {
			return nil, fmt.Errorf("%s: no split %q: no file is named after a split, so every file is \"train\"", dir, split)
		}
		bySplit["train"] = all
	}
	files := bySplit[split]
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no split %q (it has %s)", dir, split, strings.Join(slices.Sorted(maps.Keys(bySplit)), ", "))
	}
	return files, nil
}

// RepoSplitFiles returns, of the files of a dataset repo (names slash-separated, relative to its
// root, as the Hub lists them), the data files that the split expressions (train, train[:1000],
// train+test) of config read, by the rules a local directory of the same files is read with
// (README.md's configs, whose content is readme, nil where there is none; else split-named
// files), so that a download can fetch only those. A save_to_disk tree (dataset_dict.json,
// state.json) is read whole: all its data files. repo names the dataset in errors.
func RepoSplitFiles(repo string, names []string, readme []byte, config string, splits ...string) ([]string, error) {
	var all []string
	for _, n := range names {
		base := path.Base(n)
		if base == "dataset_dict.json" || base == "state.json" {
			all = nil
			for _, m := range names {
				if IsDataFile(path.Base(m)) {
					all = append(all, m)
				}
			}
			slices.Sort(all)
			return all, nil
		}
		if IsDataFile(base) && !hiddenPath(n) {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	configs, err := parseReadmeConfigs(repo, readme)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, expr := range splits {
		parts, err := parseSplit(expr)
		if err != nil {
			return nil, err
		}
		for _, part := range parts {
			files, err := selectSplit(repo, all, configs, config, part.name)
			if err != nil {
				return nil, err
			}
			for _, f := range files {
				if !slices.Contains(out, f) {
					out = append(out, f)
				}
			}
		}
	}
	return out, nil
}

// hiddenPath reports whether a slash-separated relative path has a hidden segment (.cache, .git),
// which dataFiles leaves out of a directory.
func hiddenPath(rel string) bool {
	for _, seg := range strings.Split(rel, "/") {
		if strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// fileSplit is the split a data file's path names (datasets' default patterns: a directory
// named after the split, or a file name that starts with it followed by -, _, ., a space or a
// digit), "" for none.
func fileSplit(rel string) string {
	segs := strings.Split(rel, "/")
	for name, words := range splitKeywords {
		for _, w := range words {
			for i, s := range segs {
				s = strings.ToLower(s)
				if i < len(segs)-1 && s == w { // a directory named after the split
					return name
				}
				if i == len(segs)-1 && strings.HasPrefix(s, w) && len(s) > len(w) && strings.ContainsRune("-_. 0123456789", rune(s[len(w)])) {
					return name
				}
			}
		}
	}
	return ""
}

// dataFiles lists the data files under dir (slash-separated, relative), sorted, leaving out
// hidden files and directories (.cache, .git).
func dataFiles(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != dir {
			if e.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !e.IsDir() && IsDataFile(e.Name()) {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read dataset: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// savedFiles are the Arrow files of one save_to_disk Dataset, from its state.json.
func savedFiles(dir string) ([]string, error) {
	var st struct {
		DataFiles []struct {
			Filename string `json:"filename"`
		} `json:"_data_files"`
	}
	if err := readJSON(filepath.Join(dir, "state.json"), &st); err != nil {
		return nil, err
	}
	if len(st.DataFiles) == 0 {
		return nil, fmt.Errorf("%s: state.json lists no _data_files", dir)
	}
	var out []string
	for _, f := range st.DataFiles {
		if f.Filename == "" || strings.Contains(f.Filename, "..") || filepath.IsAbs(f.Filename) {
			return nil, fmt.Errorf("%s: state.json: bad data file name %q", dir, f.Filename)
		}
		out = append(out, filepath.Join(dir, f.Filename))
	}
	return out, nil
}

// hubConfig is one entry of README.md's `configs:` (datasets' metadata).
type hubConfig struct {
	Name      string
	Default   bool
	DataFiles []hubDataFiles
}

type hubDataFiles struct {
	Split string
	Paths []string
}

// readmeConfigs reads the configs of dir's README.md front matter (none when it has none).
func readmeConfigs(dir string) ([]hubConfig, error) {
	b, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read dataset: %w", err)
	}
	return parseReadmeConfigs(dir, b)
}

// parseReadmeConfigs reads the configs of a README.md's front matter b (none when it has none);
// dir names the dataset in errors.
func parseReadmeConfigs(dir string, b []byte) ([]hubConfig, error) {
	s := strings.ReplaceAll(string(b), "\r\n", "\n")
	if !strings.HasPrefix(s, "---\n") {
		return nil, nil
	}
	end := strings.Index(s[4:], "\n---")
	if end < 0 {
		return nil, nil
	}
	var meta struct {
		Configs []struct {
			ConfigName string    `yaml:"config_name"`
			Default    bool      `yaml:"default"`
			DataFiles  yaml.Node `yaml:"data_files"`
		} `yaml:"configs"`
	}
	if err := yaml.Unmarshal([]byte(s[4:4+end]), &meta); err != nil {
		return nil, fmt.Errorf("%s: README.md metadata: %w", dir, err)
	}
	var out []hubConfig
	for _, c := range meta.Configs {
		hc := hubConfig{Name: c.ConfigName, Default: c.Default}
		if hc.Name == "" {
			hc.Name = "default"
		}
		df, err := parseDataFiles(&c.DataFiles)
		if err != nil {
			return nil, fmt.Errorf("%s: README.md: config %s: data_files: %w", dir, hc.Name, err)
		}
		hc.DataFiles = df
		out = append(out, hc)
	}
	return out, nil
}

// parseDataFiles reads a config's data_files: a pattern, a list of patterns (both the train
// split), or a list of {split, path} with path a pattern or a list of them.
func parseDataFiles(n *yaml.Node) ([]hubDataFiles, error) {
	switch n.Kind {
	case 0:
		return nil, errors.New("missing")
	case yaml.ScalarNode:
		return []hubDataFiles{{Split: "train", Paths: []string{n.Value}}}, nil
	case yaml.SequenceNode:
		var out []hubDataFiles
		var plain []string
		for _, e := range n.Content {
			if e.Kind == yaml.ScalarNode {
				plain = append(plain, e.Value)
				continue
			}
			var x struct {
				Split string    `yaml:"split"`
				Path  yaml.Node `yaml:"path"`
			}
			if err := e.Decode(&x); err != nil {
				return nil, err
			}
			var paths []string
			switch x.Path.Kind {
			case yaml.ScalarNode:
				paths = []string{x.Path.Value}
			case yaml.SequenceNode:
				if err := x.Path.Decode(&paths); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("split %s has no path", x.Split)
			}
			out = append(out, hubDataFiles{Split: x.Split, Paths: paths})
		}
		if len(plain) > 0 {
			out = append(out, hubDataFiles{Split: "train", Paths: plain})
		}
		return out, nil
	}
	return nil, errors.New("neither a pattern nor a list")
}

// pickConfig is the config named name, else the default one (marked default, or named
// "default", or the only one).
func pickConfig(dir string, configs []hubConfig, name string) (hubConfig, error) {
	var names []string
	for _, c := range configs {
		names = append(names, c.Name)
		if name != "" && c.Name == name {
			return c, nil
		}
	}
	if name != "" {
		return hubConfig{}, fmt.Errorf("%s: no config %q (it has %s)", dir, name, strings.Join(names, ", "))
	}
	for _, c := range configs {
		if c.Default {
			return c, nil
		}
	}
	for _, c := range configs {
		if c.Name == "default" {
			return c, nil
		}
	}
	if len(configs) == 1 {
		return configs[0], nil
	}
	return hubConfig{}, fmt.Errorf("%s: several configs (%s) and none is the default: name one with --dataset-config", dir, strings.Join(names, ", "))
}

// matchDoubleStar matches a data_files pattern with ** (any number of directories).
func matchDoubleStar(pat, name string) bool {
	if !strings.Contains(pat, "**") {
		return false
	}
	var re strings.Builder
	re.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch c := pat[i]; {
		case c == '*' && i+1 < len(pat) && pat[i+1] == '*':
			re.WriteString(".*")
			i++
			if i+1 < len(pat) && pat[i+1] == '/' {
				re.WriteString("/?")
				i++
			}
		case c == '*':
			re.WriteString("[^/]*")
		case c == '?':
			re.WriteString("[^/]")
		default:
			re.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	re.WriteString("$")
	ok, _ := regexp.MatchString(re.String(), name)
	return ok
}

// splitPart is one split of a split expression with its slice.
type splitPart struct {
	name     string
	from, to *sliceBound // nil: the start / the end
}

type sliceBound struct {
	n   int
	pct bool
}

var splitPattern = regexp.MustCompile(`^([A-Za-z0-9_.-]+)(?:\[(-?\d+%?)?:(-?\d+%?)?\])?$`)

// parseSplit parses a split expression: NAME, NAME[a:b] with a, b integers or percentages (either
// may be left out, negative counts from the end), joined with '+'.
func parseSplit(s string) ([]splitPart, error) {
	if s == "" {
		s = "train"
	}
	var out []splitPart
	for _, p := range strings.Split(s, "+") {
		m := splitPattern.FindStringSubmatch(strings.TrimSpace(p))
		if m == nil {
			return nil, fmt.Errorf("split %q: want NAME or NAME[start:end] (train, train[:1000], train[10%%:], train+test)", s)
		}
		part := splitPart{name: m[1]}
		for i, b := range []**sliceBound{&part.from, &part.to} {
			if v := m[2+i]; v != "" {
				n, _ := strconv.Atoi(strings.TrimSuffix(v, "%"))
				*b = &sliceBound{n: n, pct: strings.HasSuffix(v, "%")}
			}
		}
		out = append(out, part)
	}
	return out, nil
}

// head is the window of a slice that needs no row count, neither negative nor a percentage
// (train[:1000], train[10:20], train[5:]), which the split's files are read up to; nil for
// the others, which slice the whole split's rows.
func (p splitPart) head() *window {
	if p.from == nil && p.to == nil {
		return nil
	}
	w := &window{to: math.MaxInt}
	for _, b := range []struct {
		bound *sliceBound
		dst   *int
	}{{p.from, &w.from}, {p.to, &w.to}} {
		if b.bound == nil {
			continue
		}
		if b.bound.pct || b.bound.n < 0 {
			return nil
		}
		*b.dst = b.bound.n
	}
	return w
}

// slice applies the part's slice to rows: Python's slice bounds, percentages of the split rounded
// to the nearest row as datasets' ReadInstruction does by default (rounding "closest").
func (p splitPart) slice(rows []Row, name string) ([]Row, error) {
	from, to, err := p.bounds(len(rows), name)
	if err != nil || from >= to {
		return nil, err
	}
	return rows[from:to], nil
}

// bounds are the part's slice bounds in a split of n rows (from ≥ to: no rows); name names the
// dataset in errors.
func (p splitPart) bounds(n int, name string) (from, to int, err error) {
	at := func(b *sliceBound, def int) (int, error) {
		if b == nil {
			return def, nil
		}
		v := b.n
		if b.pct {
			if v < -100 || v > 100 {
				return 0, fmt.Errorf("%s: split %s: %d%% is not a percentage", name, p.name, v)
			}
			v = int(math.RoundToEven(float64(v) * float64(n) / 100))
		}
		if v < 0 {
			v += n
		}
		return min(max(v, 0), n), nil
	}
	if from, err = at(p.from, 0); err != nil {
		return 0, 0, err
	}
	to, err = at(p.to, n)
	return from, to, err
}

// countedWindow is the window of a slice that needs the split's row count (train[-100:],
// train[:10%]): the rows are counted first, without keeping them — Parquet's from its footer,
// JSON Lines' as its lines that are not blank, a JSON array's values decoded one at a time and
// let go, CSV's records, Arrow's record batches' lengths — so that only the slice's rows are
// then parsed and kept. nil where a count fails (the read then reports why). name names the
// dataset in errors.
func countedWindow(files []string, part splitPart, name string) (*window, error) {
	n := 0
	for _, f := range files {
		var rows int
		var err error
		switch fileFormat(f) {
		case ".parquet":
			rows, err = parquetRowCount(f)
		case ".csv":
			rows, err = csvRowCount(f)
		case ".arrow":
			rows, err = arrowRowCount(f)
		default: // JSON Lines or a JSON array, as readFile reads any other file
			rows, err = jsonRowCount(f)
		}
		if err != nil {
			return nil, nil
		}
		n += rows
	}
	from, to, err := part.bounds(n, name)
	if err != nil {
		return nil, err
	}
	return &window{from: from, to: max(to, from)}, nil
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("read dataset: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
