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

// openModel resolves --model (a local directory or a HuggingFace repo id, see models/hub) and
// creates the backend named by --backend (see internal/backend). The caller finalizes the backend.
func openModel(ctx context.Context, model, backendCfg string) (string, backends.Backend, error) {
	dir, err := hub.Resolve(ctx, model, hub.Options{})
	if err != nil {
		return "", nil, err
	}
	b, err := backend.New(backend.Resolve(backendCfg))
	if err != nil {
		return "", nil, err
	}
	return dir, b, nil
}
