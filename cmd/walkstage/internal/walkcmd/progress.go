package walkcmd

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
)

// progress reports a long job: a redrawn bar when out is a terminal, a
// plain line every logEvery otherwise (logs, CI, pipes).
type progress struct {
	out      io.Writer
	tty      bool
	total    int64
	unit     string
	start    time.Time
	logEvery time.Duration

	mu   sync.Mutex
	last time.Time
	done bool
}

func newProgress(out io.Writer, total int64, unit string) *progress {
	p := &progress{out: out, total: total, unit: unit, start: time.Now(), logEvery: 5 * time.Second}
	if f, ok := out.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		p.tty = true
	}
	return p
}

// update redraws at most 5 times a second on a terminal, and logs every
// logEvery otherwise. done counts units, steps the work behind them.
func (p *progress) update(done, steps, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	now := time.Now()
	every := p.logEvery
	if p.tty {
		every = 200 * time.Millisecond
	}
	if now.Sub(p.last) < every {
		return
	}
	p.last = now
	p.draw(now, done, steps, bytes)
}

// finish draws the final state and ends the bar's line.
func (p *progress) finish(done, steps, bytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done {
		return
	}
	p.done = true
	p.draw(time.Now(), done, steps, bytes)
	if p.tty {
		fmt.Fprintln(p.out)
	}
}

func (p *progress) draw(now time.Time, done, steps, bytes int64) {
	el := now.Sub(p.start).Seconds()
	frac := 1.0
	if p.total > 0 {
		frac = float64(done) / float64(p.total)
	}
	rate := float64(steps) / max(el, 1e-9)
	eta := "-"
	if done > 0 && done < p.total {
		eta = time.Duration(el / frac * (1 - frac) * float64(time.Second)).Round(time.Second).String()
	}
	stats := fmt.Sprintf("%s/%s %s  %s steps/s  %s written  elapsed %s  ETA %s", si(float64(done)), si(float64(p.total)), p.unit,
		si(rate), cli.HumanBytes(bytes), time.Duration(el*float64(time.Second)).Round(time.Second), eta)
	if !p.tty {
		fmt.Fprintf(p.out, "progress: %5.1f%% %s\n", 100*frac, stats)
		return
	}
	const width = 30
	n := int(frac * width)
	bar := strings.Repeat("=", n) + strings.Repeat(" ", width-n)
	if n < width {
		bar = bar[:n] + ">" + bar[n+1:]
	}
	fmt.Fprintf(p.out, "\r[%s] %5.1f%% %s\x1b[K", bar, 100*frac, stats)
}

// si renders a count with a metric suffix: 1234567 -> "1.23M".
func si(x float64) string {
	for _, u := range []struct {
		div float64
		s   string
	}{{1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if x >= u.div {
			return fmt.Sprintf("%.3g%s", x/u.div, u.s)
		}
	}
	return fmt.Sprintf("%.0f", x)
}
