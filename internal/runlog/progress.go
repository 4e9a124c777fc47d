package runlog

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"
)

// Progress shows training progress: on a terminal a single line redrawn in place,
//
//	step 120/500 [####----------------]  24% | 3.41 it/s | ETA 01:51 | loss 0.6931
//
// and otherwise one log/slog line per logging step with the step, rate, ETA and the metrics.
// Its Write method prints text above the bar, so a slog handler can write to it.
type Progress struct {
	Terminal bool             // draw the bar; set by NewProgress from the writer
	Now      func() time.Time // the clock (tests replace it)
	Logger   *slog.Logger     // plain-mode lines; by default a text handler on the writer

	mu       sync.Mutex
	w        io.Writer
	total    int
	step     int
	t0       time.Time // time of the first Step call, so the first step's compilation is excluded
	step0    int
	lastDraw time.Time
	loss     float64
	haveLoss bool
	drawn    bool
}

// NewProgress returns a display for a run of total steps that starts after startStep (0, or the
// step resumed from). It draws a bar if w is a terminal: an *os.File, or a writer over one that
// says so with an Fd method (the CLI's stderr).
func NewProgress(w io.Writer, total, startStep int) *Progress {
	p := &Progress{w: w, total: total, step: startStep, step0: -1, Now: time.Now}
	if f, ok := w.(interface{ Fd() uintptr }); ok && term.IsTerminal(int(f.Fd())) { // an *os.File, or a writer over one
		p.Terminal = true
	}
	p.Logger = slog.New(slog.NewTextHandler(w, nil))
	return p
}

// Step records that optimizer step `step` is done and redraws the bar (at most 10 times a second,
// and always on the last step).
func (p *Progress) Step(step int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.Now()
	if p.step0 < 0 {
		p.t0, p.step0 = now, step
	}
	p.step = step
	if p.Terminal && (now.Sub(p.lastDraw) >= 100*time.Millisecond || step >= p.total) {
		p.draw(now)
	}
}

// Log takes the record of a logging step: on a terminal its loss goes on the bar; otherwise it is
// logged as one line.
func (p *Progress) Log(r Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if loss, ok := r.Metrics["loss"]; ok {
		p.loss, p.haveLoss = loss, true
	}
	now := p.Now()
	if p.Terminal {
		p.draw(now)
		return
	}
	rate, eta := p.rateETA(now)
	args := []any{"step", r.Step, "total", p.total, "epoch", logFloat(r.Epoch)}
	for _, k := range r.Keys() {
		args = append(args, k, logFloat(r.Metrics[k]))
	}
	if r.IsEval() {
		p.Logger.Info("eval", args...)
		return
	}
	args = append(args, "it/s", fmt.Sprintf("%.3g", rate), "eta", eta)
	p.Logger.Info("train", args...)
}

// Write prints b on its own line(s) above the bar (as is when not on a terminal).
func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.Terminal || !p.drawn {
		return p.w.Write(b)
	}
	if _, err := io.WriteString(p.w, "\r\033[K"); err != nil {
		return 0, err
	}
	n, err := p.w.Write(b)
	if err == nil {
		p.draw(p.Now())
	}
	return n, err
}

// Done ends the bar's line.
func (p *Progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.Terminal && p.drawn {
		p.draw(p.Now())
		io.WriteString(p.w, "\n")
		p.drawn = false
	}
}

// logFloat formats v as in metrics.jsonl, without quotes around NaN and infinities.
func logFloat(v float64) string {
	return strings.Trim(string(AppendFloat(nil, v)), `"`)
}

func (p *Progress) draw(now time.Time) {
	p.lastDraw, p.drawn = now, true
	io.WriteString(p.w, "\r\033[K"+p.line(now))
}

// line is the bar's text.
func (p *Progress) line(now time.Time) string {
	const width = 20
	frac := 0.0
	if p.total > 0 {
		frac = math.Min(1, float64(p.step)/float64(p.total))
	}
	fill := int(frac * width)
	var b strings.Builder
	fmt.Fprintf(&b, "step %d/%d [%s%s] %3.0f%%", p.step, p.total,
		strings.Repeat("#", fill), strings.Repeat("-", width-fill), 100*frac)
	rate, eta := p.rateETA(now)
	switch {
	case rate == 0:
		b.WriteString(" | ? it/s")
	case rate < 1:
		fmt.Fprintf(&b, " | %.2f s/it", 1/rate)
	default:
		fmt.Fprintf(&b, " | %.2f it/s", rate)
	}
	b.WriteString(" | ETA " + eta)
	if p.haveLoss {
		fmt.Fprintf(&b, " | loss %.4f", p.loss)
	}
	return b.String()
}

// rateETA returns steps per second since the first Step call and the time left as [h:]mm:ss.
func (p *Progress) rateETA(now time.Time) (float64, string) {
	dt := now.Sub(p.t0).Seconds()
	if p.step0 < 0 || p.step <= p.step0 || dt <= 0 {
		return 0, "?"
	}
	rate := float64(p.step-p.step0) / dt
	left := time.Duration(float64(max(0, p.total-p.step)) / rate * float64(time.Second))
	return rate, formatDuration(left)
}

func formatDuration(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}
