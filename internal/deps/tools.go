//go:build tools

// Package deps pins the modules that the design card names, so `go mod tidy` keeps them while the
// packages that use them are being written. It is never built.
package deps

import (
	_ "github.com/daulet/tokenizers"
	_ "github.com/gomlx/go-huggingface/hub"
	_ "github.com/gomlx/gomlx/backends/simplego"
	_ "github.com/gomlx/gomlx/backends/xla"
	_ "github.com/gomlx/gomlx/pkg/core/graph"
	_ "github.com/gomlx/gomlx/pkg/ml/context"
	_ "github.com/gomlx/gomlx/pkg/ml/train/optimizers"
	_ "github.com/nikolalohinski/gonja/v2"
	_ "github.com/urfave/cli/v3"
	_ "golang.org/x/term"
	_ "gonum.org/v1/plot"
	_ "gopkg.in/yaml.v3"
)
