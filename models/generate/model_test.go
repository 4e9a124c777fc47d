package generate_test

import (
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/posttrain/posttrain/models/decoder"
	"github.com/posttrain/posttrain/models/generate"
)

// cacheMismatch is decoder.Arch whose prompt pass hands the generator a different number of key and
// value tensors than its layers use: keep(kv) of them.
type cacheMismatch struct {
	decoder.Arch
	keep func(kv []*graph.Node) []*graph.Node
}

func (m cacheMismatch) Prefill(ctx *context.Context, ids, pos, mask *graph.Node) (*graph.Node, []*graph.Node) {
	logits, kv := m.Arch.Prefill(ctx, ids, pos, mask)
	return logits, m.keep(kv)
}

// A model that breaks Model's cache contract (a key and value per layer from Prefill, one Update
// per such layer in Decode) gets an error naming the mismatch, on both sides, not a crash or a
// silently stale cache.
func TestGenerate_ModelCacheContract(t *testing.T) {
	m := loadTiny(t, dtypes.Float32)
	for _, c := range []struct {
		name string
		keep func(kv []*graph.Node) []*graph.Node
		want string
	}{
		{"odd", func(kv []*graph.Node) []*graph.Node { return kv[:len(kv)-1] }, "returned 3 key and value tensors, want a pair per layer"},
		{"extra layer", func(kv []*graph.Node) []*graph.Node { return append(kv, kv[0], kv[1]) }, "did not update cache 4 (layer 2)"},
		{"missing layer", func(kv []*graph.Node) []*graph.Node { return kv[:2] }, "layer 1, but the prompt pass returned 2 caches (1 layers)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := generate.NewGenerator(m.backend, m.ctx, cacheMismatch{Arch: decoder.Arch{Config: m.cfg}, keep: c.keep})
			defer g.Finalize()
			_, err := g.Generate([][]int32{{1, 2, 3}}, generate.Options{MaxNewTokens: 3, IgnoreEOS: true})
			if err == nil || !strings.HasPrefix(err.Error(), "qwen2 generate: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want a qwen2 generate error containing %q", err, c.want)
			}
		})
	}
}

// twiceUpdated is decoder.Arch whose decode step hands layer 0's key and value to the cache twice.
type twiceUpdated struct{ decoder.Arch }

func (m twiceUpdated) Decode(ctx *context.Context, tok, pos *graph.Node, cache *generate.Cache) *graph.Node {
	kv := graph.Zeros(tok.Graph(), shapes.Make(dtypes.Float32, tok.Shape().Dim(0), m.Config.NumKeyValueHeads, 1, m.Config.HeadDim))
	cache.Update(0, kv, kv)
	return m.Arch.Decode(ctx, tok, pos, cache)
}

func TestGenerate_CacheUpdatedTwice(t *testing.T) {
	m := loadTiny(t, dtypes.Float32)
	g := generate.NewGenerator(m.backend, m.ctx, twiceUpdated{decoder.Arch{Config: m.cfg}})
	defer g.Finalize()
	_, err := g.Generate([][]int32{{1, 2, 3}}, generate.Options{MaxNewTokens: 2, IgnoreEOS: true})
	if want := "layer 0 updated twice"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want an error containing %q", err, want)
	}
}
