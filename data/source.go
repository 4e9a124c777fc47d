package data

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// A Source generates a dataset by name instead of reading a file: a --dataset value that names a
// registered source (the course's multiplication task registers "mult" in data/mult) yields its
// rows in the format the trainer asks for. Trainers know the names only as --dataset values.
type Source func(want Format) (*Dataset, error)

var (
	sourcesMu sync.RWMutex
	sources   = map[string]Source{}
)

// RegisterSource makes a generated dataset available as --dataset name. It panics on a duplicate
// name or a name that looks like a file path (it holds a '/' or a '.'); call it from init.
func RegisterSource(name string, s Source) {
	if name == "" || strings.ContainsAny(name, "/.") {
		panic("data: dataset source name " + name + " could be a file path")
	}
	sourcesMu.Lock()
	defer sourcesMu.Unlock()
	if _, dup := sources[name]; dup {
		panic("data: dataset source " + name + " registered twice")
	}
	sources[name] = s
}

// SourceNames lists the registered dataset sources, sorted.
func SourceNames() []string {
	sourcesMu.RLock()
	defer sourcesMu.RUnlock()
	names := make([]string, 0, len(sources))
	for n := range sources {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Open returns the dataset --dataset names: the rows of a registered source in the format the
// trainer wants, else the file read with its format detected (ReadFile(name, FormatAuto)), which
// the caller checks against want as it does for any file.
func Open(name string, want Format) (*Dataset, error) {
	return OpenWith(name, want, ReadOptions{})
}

// OpenWith is Open reading a file or directory with o (its split and config).
func OpenWith(name string, want Format, o ReadOptions) (*Dataset, error) {
	sourcesMu.RLock()
	s, ok := sources[name]
	sourcesMu.RUnlock()
	if !ok {
		return ReadFileWith(name, o)
	}
	if o.Split != "" && o.Split != "train" {
		return nil, fmt.Errorf("dataset %s: a generated dataset has one split, not %q", name, o.Split)
	}
	d, err := s(want)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	return d, nil
}
