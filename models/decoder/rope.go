package decoder

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Rope is the config's rotary scaling (rope_scaling, or transformers ≥ 5's rope_parameters) as
// transformers' modeling_rope_utils.py reads it. Type "" is the original RoPE ("default"); "llama3"
// is _compute_llama3_parameters with its four fields; "linear" (Gemma 3 only: Family.RopeTypes)
// is _compute_linear_scaling_rope_parameters, the frequencies divided by factor. Other types are
// refused by parseRope.
type Rope struct {
	Type                          string  `json:"rope_type,omitempty"`
	Factor                        float64 `json:"factor,omitempty"`
	LowFreqFactor                 float64 `json:"low_freq_factor,omitempty"`
	HighFreqFactor                float64 `json:"high_freq_factor,omitempty"`
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings,omitempty"`
}

// RopeTypes are the rope_type values supported by default (Family.RopeTypes may differ).
var RopeTypes = []string{"default", "llama3"}

// ropeKeys are the keys each rope type may carry besides rope_type (the legacy "type") and
// rope_theta (rope_parameters only).
var ropeKeys = map[string][]string{
	"default": nil,
	"llama3":  {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
	"linear":  {"factor"},
}

// parseRope reads a rope_scaling / rope_parameters object (field names it in errors): the type,
// its parameters, and rope_theta when present. null or absent is the default RoPE. A type not in
// types (the family's), a key the type does not use, or a missing or invalid parameter is an error.
func parseRope(field string, raw json.RawMessage, types []string) (rope Rope, theta *float64, err error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return Rope{}, nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return Rope{}, nil, fmt.Errorf("config field %s: %w", field, err)
	}
	typ := "default"
	for _, key := range []string{"type", "rope_type"} { // rope_type wins, as in transformers
		if v, ok := m[key]; ok {
			if err := json.Unmarshal(v, &typ); err != nil {
				return Rope{}, nil, fmt.Errorf("config field %s.%s: %w", field, key, err)
			}
		}
	}
	allowed, ok := ropeKeys[typ]
	if !ok || !slices.Contains(types, typ) {
		return Rope{}, nil, fmt.Errorf("config field %s.rope_type: %q is not supported (supported: %s)", field, typ, quoteList(types))
	}
	for key, v := range m {
		switch {
		case key == "type" || key == "rope_type":
		case key == "rope_theta":
			theta = new(float64)
			if err := json.Unmarshal(v, theta); err != nil {
				return Rope{}, nil, fmt.Errorf("config field %s.rope_theta: %w", field, err)
			}
		case !slices.Contains(allowed, key):
			return Rope{}, nil, fmt.Errorf("config field %s.%s: not supported with rope_type %q (its keys: %s)", field, key, typ, quoteList(allowed))
		}
	}
	if typ == "default" {
		return Rope{}, theta, nil
	}
	rope = Rope{Type: typ}
	if err := json.Unmarshal(raw, &rope); err != nil {
		return Rope{}, nil, fmt.Errorf("config field %s: %w", field, err)
	}
	rope.Type = typ
	if err := rope.validate(field); err != nil {
		return Rope{}, nil, err
	}
	return rope, theta, nil
}

// validate checks the llama3 parameters as transformers' _validate_llama3_parameters does, and
// linear's factor as _validate_linear_scaling_rope_parameters does.
func (r Rope) validate(field string) error {
	if r.Type == "" {
		return nil
	}
	if r.Factor < 1 {
		return fmt.Errorf("config field %s.factor: must be ≥ 1, got %g", field, r.Factor)
	}
	if r.Type == "linear" {
		return nil
	}
	if r.LowFreqFactor <= 0 || r.HighFreqFactor <= r.LowFreqFactor {
		return fmt.Errorf("config field %s: need 0 < low_freq_factor < high_freq_factor, got %g and %g", field, r.LowFreqFactor, r.HighFreqFactor)
	}
	if r.OriginalMaxPositionEmbeddings <= 0 {
		return fmt.Errorf("config field %s.original_max_position_embeddings: must be positive, got %d", field, r.OriginalMaxPositionEmbeddings)
	}
	return nil
}

func quoteList(s []string) string {
	q := make([]string, len(s))
	for i, x := range s {
		q[i] = fmt.Sprintf("%q", x)
	}
	return strings.Join(q, ", ")
}

// InvFreq is RoPE's inverse frequency of each pair of a head, [head_dim/2]: θ^(-2i/hd) (the
// default), rescaled by the llama3 rule when Rope.Type is "llama3" (llama3InvFreq, llama.go),
// divided by factor when "linear". Computed in float64. (Gemma 3's sliding-window layers use LocalInvFreq instead.)
func (c *Config) InvFreq() []float64 {
	inv := defaultInvFreq(c.RopeTheta, c.HeadDim)
	r := c.Rope
	if r.Type == "linear" {
		for i := range inv {
			inv[i] /= r.Factor
		}
	}
	if r.Type == "llama3" {
		llama3InvFreq(r, inv)
	}
	return inv
}

// defaultInvFreq is the original RoPE's θ^(-2i/hd) for i < hd/2.
func defaultInvFreq(theta float64, headDim int) []float64 {
	inv := make([]float64, headDim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(theta, float64(2*i)/float64(headDim))
	}
	return inv
}

// ropeJSON is the rope_scaling value config.json gets: null for the default RoPE.
func (r Rope) ropeJSON() any {
	if r.Type == "" {
		return nil
	}
	return r
}
