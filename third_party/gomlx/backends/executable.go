package backends

import (
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Executable is the API for compiled programs ready to execute.
type Executable interface {
	// Finalize immediately frees resources associated to the executable.
	Finalize()

	// Inputs returns the parameters' names and shapes, in order created by the Builder.Parameter calls.
	Inputs() (names []string, inputShapes []shapes.Shape)

	// Outputs return the computation's output shapes, in the order given to the Builder.Compile call.
	Outputs() (outputShapes []shapes.Shape)

	// Execute the computation.
	// The number and shapes of the inputs must match those returned by Inputs.
	//
	// The inputs marked as donate will become invalid after use.
	// This is useful if the input buffer is no longer needed or if updating a variable
	// so its Buffer space can be reused as an output Buffer.
	//
	// Donated buffers are no longer valid after the call.
	// If donate is nil, it is assumed to be false for all buffers, and no buffer is donated.
	//
	// For portable computations (not compiled with a fixed device assignment), the execution runs on the defaultDevice.
	// For non-portable computations (where the device assignment is fixed), the defaultDevice is ignored.
	Execute(inputs []Buffer, donate []bool, defaultDevice DeviceNum) ([]Buffer, error)
}

// CompiledMemoryStats are the sizes, in bytes, of the buffers a backend's compiler planned for one
// execution of an executable on one device: its arguments, its outputs, the part of the outputs
// written into donated arguments (aliases), the temporaries, and the generated code. The device
// memory an execution needs is about Arguments + Outputs - Aliases + Temporary + GeneratedCode.
type CompiledMemoryStats struct {
	Arguments, Outputs, Aliases, Temporary, GeneratedCode int64
}

// MemoryStatser is implemented by an Executable whose backend reports its compiled memory plan
// (XLA: the buffer assignment's sizes, PJRT_Executable_GetCompiledMemoryStats).
type MemoryStatser interface {
	CompiledMemoryStats() (CompiledMemoryStats, error)
}

// CostAnalyzer is implemented by an Executable whose backend reports its compiler's cost analysis
// of the program (XLA: PJRT_Executable_GetCostAnalysis): numeric properties by name, such as
// "flops", "transcendentals" and "bytes accessed", whose set depends on the platform.
type CostAnalyzer interface {
	CostAnalysis() (map[string]float64, error)
}
