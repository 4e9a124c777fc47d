package xla

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/pkg/errors"
)

// aliasingOutputAttribute is the argument attribute of a StableHLO main function by which XLA makes
// an output share the buffer of that argument when it is donated (HloInputOutputAliasConfig); JAX
// marks its donated arguments the same way.
const aliasingOutputAttribute = "tf.aliasing_output"

// Compile-time check.
var _ backends.InputOutputAliaser = (*Builder)(nil)

// AliasOutputToParameter implements backends.InputOutputAliaser: output #outputIdx of Compile is
// written into the buffer of parameter when the parameter is donated at execution. A parameter that
// is not donated keeps its buffer, and the output gets a buffer of its own.
func (b *Builder) AliasOutputToParameter(outputIdx int, parameter backends.Op) error {
	nodes, err := b.verifyAndCastValues("AliasOutputToParameter", parameter)
	if err != nil {
		return err
	}
	value := nodes[0].value
	if outputIdx < 0 {
		return errors.Errorf("AliasOutputToParameter: negative output index %d", outputIdx)
	}
	if slices.Index(b.fn.Inputs, value) == -1 {
		return errors.Errorf("AliasOutputToParameter: the Op given for output #%d is not a parameter", outputIdx)
	}
	for _, input := range b.fn.Inputs {
		if idx, found := input.Attributes[aliasingOutputAttribute]; found && idx == int32(outputIdx) && input != value {
			return errors.Errorf("AliasOutputToParameter: output #%d is already aliased to another parameter", outputIdx)
		}
	}
	if value.Attributes == nil {
		value.Attributes = make(map[string]any)
	}
	value.Attributes[aliasingOutputAttribute] = int32(outputIdx)
	return nil
}
