package trainable

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads as math with the dot import

	"github.com/posttrain/posttrain/internal/backend"
)

// CopyOfMaster is the compute copy (dtype) of a float32 master θ, rounded as the host's toBF16
// rounds (bfloat16.FromFloat32: the low 16 bits cut), so that a run resumed from its float32
// masters (SetWeights) has the bf16 weights of a run that never stopped. The pure-Go backend's
// ConvertDType cuts the same way; XLA's rounds to nearest even (resumes on xla:cpu differed from
// step 2 on), so there the bits are cut explicitly. simplego has no Bitcast or shifts.
func CopyOfMaster(theta *Node, dtype dtypes.DType) *Node {
	if dtype != dtypes.BFloat16 || theta.DType() != dtypes.Float32 || backend.IsPureGo(theta.Graph().Backend()) {
		return ConvertDType(theta, dtype)
	}
	high := BitwiseShiftRightLogicalScalar(Bitcast(theta, dtypes.Uint32), 16) // the sign, exponent and 7 mantissa bits
	return Bitcast(ConvertDType(high, dtypes.Uint16), dtypes.BFloat16)
}
