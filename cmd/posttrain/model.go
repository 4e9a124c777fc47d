package main

import (
	"context"

	"github.com/gomlx/gomlx/backends"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/hub"
)

// backendFlag is the --backend flag of every command that runs a graph.
func backendFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "backend", Usage: "GoMLX backend (default $GOMLX_BACKEND, else " + backend.Default + "); e.g. xla:cuda"}
}

// resolveModel is the checkpoint directory of --model: a local directory, a GGUF file or
// ollama:NAME[:TAG] (converted once into a cache, model_gguf.go), or a HuggingFace repo id (see
// models/hub).
func resolveModel(ctx context.Context, model string) (string, error) {
	if dir, ok, err := resolveGGUF(model); ok {
		return dir, err
	}
	return hub.Resolve(ctx, model, hub.Options{})
}

// openModel resolves --model (resolveModel) and creates the backend named by --backend (see
// internal/backend). The caller finalizes the backend.
func openModel(ctx context.Context, model, backendCfg string) (string, backends.Backend, error) {
	dir, err := resolveModel(ctx, model)
	if err != nil {
		return "", nil, err
	}
	b, err := backend.New(backend.Resolve(backendCfg))
	if err != nil {
		return "", nil, err
	}
	return dir, b, nil
}
