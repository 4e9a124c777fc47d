package safetensors

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The file names HuggingFace transformers uses for a checkpoint's weights.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// IncompleteMarker is the file a posttrain run keeps in its output directory while it replaces the
// final model's files there one by one (internal/checkpoint.WriteFiles, which names it too,
// checkpoint.IncompleteMarker): a run killed meanwhile leaves it, and the weights may then be a mix
// of two models. ReadModelDir and OpenModelDir refuse a directory that holds it.
const IncompleteMarker = ".posttrain-model-incomplete"

// Index is the content of model.safetensors.index.json.
type Index struct {
	Metadata  map[string]any    `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"`
}

// ReadModelDir reads a checkpoint's weights from dir: model.safetensors if present (as
// transformers prefers it), else model.safetensors.index.json and every shard it names. Each
// tensor must be in exactly the shard the index names, and each shard tensor must be in the index.
func ReadModelDir(dir string) (map[string]*Tensor, error) {
	return loadModelDir(dir, func(path string) (*File, error) {
		tensors, metadata, err := ReadFile(path)
		if err != nil {
			return nil, err
		}
		return &File{Path: path, Tensors: tensors, Metadata: metadata}, nil
	})
}

// OpenModelDir is ReadModelDir through Open: the tensors' Data point into read-only memory maps,
// valid until Close. Use it to convert a large checkpoint without holding a copy of its files.
func OpenModelDir(dir string) (*Model, error) {
	m := &Model{}
	tensors, err := loadModelDir(dir, func(path string) (*File, error) {
		f, err := Open(path)
		if err == nil {
			m.files = append(m.files, f)
		}
		return f, err
	})
	if err != nil {
		m.Close()
		return nil, err
	}
	m.Tensors = tensors
	return m, nil
}

// Model is a checkpoint's weights opened with OpenModelDir.
type Model struct {
	Tensors map[string]*Tensor
	files   []*File
}

// Close unmaps the files; the tensors' Data must not be used afterwards.
func (m *Model) Close() error {
	var first error
	for _, f := range m.files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	m.files, m.Tensors = nil, nil
	return first
}

// loadModelDir implements ReadModelDir with open reading one file.
func loadModelDir(dir string, open func(path string) (*File, error)) (map[string]*Tensor, error) {
	if marker := filepath.Join(dir, IncompleteMarker); exists(marker) {
		return nil, fmt.Errorf("safetensors: %s exists: a training run stopped while it replaced the model files of %s one by one, so they may be a mix of two models; load its latest checkpoint-N instead, or rerun the training with --resume", marker, dir)
	}
	single := filepath.Join(dir, SingleFileName)
	if _, err := os.Stat(single); err == nil {
		f, err := open(single)
		if err != nil {
			return nil, err
		}
		return f.Tensors, nil
	}
	indexPath := filepath.Join(dir, IndexFileName)
	idx, err := ReadIndex(indexPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("safetensors: %s has neither %s nor %s", dir, SingleFileName, IndexFileName)
	}
	if err != nil {
		return nil, err
	}
	tensors := map[string]*Tensor{}
	for _, shard := range idx.Shards() {
		shardPath := filepath.Join(dir, shard)
		f, err := open(shardPath)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("safetensors %s: shard %s named in the index does not exist", indexPath, shard)
		}
		if err != nil {
			return nil, err
		}
		for name, t := range f.Tensors {
			if want, ok := idx.WeightMap[name]; !ok || want != shard {
				return nil, fmt.Errorf("safetensors %s: tensor %q is not mapped to this shard in %s", shardPath, name, IndexFileName)
			}
			tensors[name] = t
		}
	}
	for _, name := range sortedKeys(idx.WeightMap) {
		if tensors[name] == nil {
			return nil, fmt.Errorf("safetensors %s: tensor %q is missing (the index maps it there)", filepath.Join(dir, idx.WeightMap[name]), name)
		}
	}
	return tensors, nil
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// ReadIndex reads and checks a model.safetensors.index.json: a non-empty weight_map whose shard
// names are plain file names in the same directory.
func ReadIndex(path string) (*Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var idx Index
	if err := json.Unmarshal(b, &idx); err != nil {
		return nil, fmt.Errorf("safetensors %s: %v", path, err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors %s: empty or missing weight_map", path)
	}
	for _, name := range sortedKeys(idx.WeightMap) {
		shard := idx.WeightMap[name]
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, fmt.Errorf("safetensors %s: tensor %q maps to invalid shard file name %q", path, name, shard)
		}
	}
	return &idx, nil
}

// Shards returns the distinct shard file names of the index, sorted.
func (idx *Index) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range idx.WeightMap {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// WriteModelDir writes tensors into dir as transformers does: one model.safetensors when
// maxShardBytes <= 0 or everything fits, else shards model-0000i-of-0000N.safetensors filled
// greedily in the given order (a tensor larger than maxShardBytes gets a shard of its own) plus
// model.safetensors.index.json. Every file carries the metadata {"format": "pt"} that
// transformers checks. Weight files of a previous checkpoint in dir are removed afterwards.
func WriteModelDir(dir string, tensors []*Tensor, maxShardBytes int64) error {
	seen := map[string]bool{}
	for _, t := range tensors {
		if t == nil {
			return fmt.Errorf("safetensors %s: nil tensor", dir)
		}
		if seen[t.Name] {
			return fmt.Errorf("safetensors %s: tensor %q appears twice", dir, t.Name)
		}
		seen[t.Name] = true
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	stale := staleWeightFiles(dir)
	meta := map[string]string{"format": "pt"}
	shards := splitShards(tensors, maxShardBytes)
	written := map[string]bool{}
	if len(shards) <= 1 {
		if err := WriteFile(filepath.Join(dir, SingleFileName), tensors, meta); err != nil {
			return err
		}
		written[SingleFileName] = true
	} else {
		idx := Index{Metadata: map[string]any{}, WeightMap: map[string]string{}}
		var total int64
		for i, shard := range shards {
			name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
			if err := WriteFile(filepath.Join(dir, name), shard, meta); err != nil {
				return err
			}
			written[name] = true
			for _, t := range shard {
				idx.WeightMap[t.Name] = name
				n, _ := t.ByteSize() // checked by WriteFile
				total += n
			}
		}
		idx.Metadata["total_size"] = total
		b, err := json.MarshalIndent(idx, "", "  ")
		if err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
		err = writeAtomic(filepath.Join(dir, IndexFileName), func(w *bufio.Writer) error {
			_, err := w.Write(append(b, '\n'))
			return err
		})
		if err != nil {
			return fmt.Errorf("safetensors: %w", err)
		}
		written[IndexFileName] = true
	}
	for _, name := range stale {
		if !written[name] {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("safetensors: remove stale %w", err)
			}
		}
	}
	return nil
}

// splitShards groups tensors greedily, in order, into shards of at most maxShardBytes.
func splitShards(tensors []*Tensor, maxShardBytes int64) [][]*Tensor {
	if maxShardBytes <= 0 {
		return [][]*Tensor{tensors}
	}
	var shards [][]*Tensor
	var cur []*Tensor
	var size int64
	for _, t := range tensors {
		n, _ := t.ByteSize() // an invalid shape is WriteFile's error
		if len(cur) > 0 && size+n > maxShardBytes {
			shards = append(shards, cur)
			cur, size = nil, 0
		}
		cur = append(cur, t)
		size += n
	}
	if len(cur) > 0 || len(shards) == 0 {
		shards = append(shards, cur)
	}
	return shards
}

// staleWeightFiles lists the weight files of a checkpoint already in dir: model.safetensors, the
// index and the shards it names (only plain, valid names).
func staleWeightFiles(dir string) []string {
	var out []string
	if _, err := os.Stat(filepath.Join(dir, SingleFileName)); err == nil {
		out = append(out, SingleFileName)
	}
	if idx, err := ReadIndex(filepath.Join(dir, IndexFileName)); err == nil {
		out = append(out, IndexFileName)
		out = append(out, idx.Shards()...)
	} else if _, err := os.Stat(filepath.Join(dir, IndexFileName)); err == nil {
		out = append(out, IndexFileName)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
