package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/backends"
	"github.com/urfave/cli/v3"

	"github.com/posttrain/posttrain/data"
	"github.com/posttrain/posttrain/internal/backend"
	"github.com/posttrain/posttrain/models/hub"
)

// backendFlag is the --backend flag of every command that runs a graph.
func backendFlag() *cli.StringFlag {
	return &cli.StringFlag{Name: "backend", Usage: "GoMLX backend: go, xla:cpu, xla:cuda, xla:/path/to/pjrt_plugin.so (default $GOMLX_BACKEND, else " + backend.DefaultGPU + " on a machine with an NVIDIA GPU, else " + backend.DefaultCPU + " when its plugin is installed (make xla-cpu), else go)"}
}

// newBackend creates the backend a --backend value names (backend.Resolve) and says on errw, in
// one line, which it is and why (backend.Describe; on the CLI's stderr a notice, see
// noticeWriter). The caller finalizes it.
func newBackend(errw io.Writer, flag string) (backends.Backend, error) {
	return newBackendWith(errw, flag, backend.Options{})
}

// newBackendWith is newBackend with client options (a trainer's GPU options).
func newBackendWith(errw io.Writer, flag string, opt backend.Options) (backends.Backend, error) {
	b, err := backend.NewWithOptions(backend.Resolve(flag), opt)
	if err != nil {
		return nil, err
	}
	announceBackend(errw, flag, b)
	return b, nil
}

// announceBackend says on errw which backend a --backend value selects (b: the backend made of
// it, or nil).
func announceBackend(errw io.Writer, flag string, b backends.Backend) {
	line := backend.Describe(flag, b)
	if n, ok := errw.(*noticeWriter); ok {
		n.Notice(line)
		return
	}
	fmt.Fprintln(errw, line)
}

// resolveModel is the checkpoint directory of --model: a local directory, a GGUF file or
// ollama:NAME[:TAG] (converted once into a cache, model_gguf.go), a LoRA adapter directory (merged
// into its base once into the same cache, model_adapter.go), or a HuggingFace repo id (see
// models/hub).
func resolveModel(ctx context.Context, model string) (string, error) {
	if dir, ok, err := resolveGGUF(model); ok {
		return dir, err
	}
	if dir, ok, err := resolveAdapter(ctx, model); ok {
		return dir, err
	}
	return hub.Resolve(ctx, model, hub.Options{})
}

// resolveDataset is the local path of a dataset option: a registered source's name (mult) or an
// existing file or directory as it is, a Hub dataset id (trl-lib/Capybara) as its snapshot in the
// HuggingFace cache, downloaded when not offline with the data files of want (models/hub
// ResolveDataset).
func resolveDataset(ctx context.Context, option, dataset string, want hub.DatasetFiles) (string, error) {
	if dataset == "" || slices.Contains(data.SourceNames(), dataset) {
		return dataset, nil
	}
	if _, err := os.Stat(dataset); err == nil || !hub.IsRepoID(dataset) || !strings.Contains(dataset, "/") {
		return dataset, nil // the reader names what is missing
	}
	dir, err := hub.ResolveDataset(ctx, dataset, want, hub.Options{})
	if err != nil {
		return "", fmt.Errorf("%s: %w", option, err)
	}
	return dir, nil
}

// openModel resolves --model (resolveModel) and creates the backend named by --backend
// (newBackend, which says it on errw). The caller finalizes the backend.
func openModel(ctx context.Context, errw io.Writer, model, backendCfg string) (string, backends.Backend, error) {
	dir, err := resolveModel(ctx, model)
	if err != nil {
		return "", nil, err
	}
	b, err := newBackend(errw, backendCfg)
	if err != nil {
		return "", nil, err
	}
	return dir, b, nil
}
