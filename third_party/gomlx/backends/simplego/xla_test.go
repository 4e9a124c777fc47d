//go:build xla || stablehlo

package simplego

import _ "github.com/gomlx/gomlx/backends/stablehlo"
