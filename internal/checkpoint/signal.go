package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// ErrInterrupted is the cause of a context cancelled by SIGINT or SIGTERM (see NotifyContext).
var ErrInterrupted = errors.New("interrupted")

// NotifyContext returns a context that is cancelled, with a cause wrapping ErrInterrupted, at the
// first SIGINT (Ctrl-C) or SIGTERM, so that the training loop can save a checkpoint and return
// cleanly. A second signal exits the process at once with status 130. stop releases the signals
// and cancels the context.
func NotifyContext(parent context.Context, logger *slog.Logger) (ctx context.Context, stop func()) {
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	go watch(ch, done, cancel, os.Exit, logger)
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(nil)
	}
}

// watch cancels at the first signal and calls exit(130) at the second; it returns when done is
// closed.
func watch(ch <-chan os.Signal, done <-chan struct{}, cancel context.CancelCauseFunc, exit func(int), logger *slog.Logger) {
	if logger == nil {
		logger = slog.Default()
	}
	select {
	case sig := <-ch:
		logger.Warn("interrupted: saving a checkpoint before exiting; send the signal again to exit now", "signal", sig.String())
		cancel(fmt.Errorf("%w by %s", ErrInterrupted, sig))
	case <-done:
		return
	}
	select {
	case sig := <-ch:
		logger.Error("interrupted twice: exiting without saving", "signal", sig.String())
		exit(130)
	case <-done:
	}
}

// Interrupted reports whether ctx was cancelled by a signal through NotifyContext.
func Interrupted(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrInterrupted)
}
