package live

import (
	"testing"
	"time"
)

// TestPublishPacerWhileBehind checks when a publication on the interval
// goes ahead: every interval while the applier keeps up; while records
// queue, only once it has applied four times as long as the last
// publication took (at most ten intervals), so that publishing takes at
// most a fifth of a backlog's catch up.
func TestPublishPacerWhileBehind(t *testing.T) {
	const iv = 100 * time.Millisecond
	t0 := time.Unix(1_800_000_000, 0)
	for _, c := range []struct {
		name   string
		took   time.Duration // the last publication's cost
		since  time.Duration // from its end to the tick
		behind bool
		due    bool
	}{
		{"keeping up, cheap", 5 * time.Millisecond, iv, false, true},
		{"keeping up, costly", 60 * time.Millisecond, iv, false, true},
		{"behind, cheap: the interval", 5 * time.Millisecond, iv, true, true},
		{"behind, cheap: before the interval", 5 * time.Millisecond, iv - time.Millisecond, true, false},
		{"behind, costly: one interval is too soon", 60 * time.Millisecond, iv, true, false},
		{"behind, costly: just before four times its cost", 60 * time.Millisecond, 239 * time.Millisecond, true, false},
		{"behind, costly: four times its cost", 60 * time.Millisecond, 240 * time.Millisecond, true, true},
		{"behind, very costly: ten intervals at most", 2 * time.Second, 10 * iv, true, true},
		{"behind, very costly: not before ten intervals", 2 * time.Second, 10*iv - time.Millisecond, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := publishPacer{interval: iv}
			p.published(t0, c.took)
			if got := p.due(t0.Add(c.since), c.behind); got != c.due {
				t.Fatalf("due %v after a publication of %v, behind %v: %v, want %v (next %v after it)",
					c.since, c.took, c.behind, got, c.due, p.next().Sub(t0))
			}
		})
	}
}

// TestQueued checks the applier's sign of a backlog: its input at least
// half full; an unbuffered input never is.
func TestQueued(t *testing.T) {
	for _, c := range []struct {
		cap, len int
		want     bool
	}{{0, 0, false}, {256, 0, false}, {256, 127, false}, {256, 128, true}, {256, 256, true}, {1, 1, true}} {
		ch := make(chan int, c.cap)
		for range c.len {
			ch <- 0
		}
		if got := queued((<-chan int)(ch)); got != c.want {
			t.Errorf("%d of %d queued: %v, want %v", c.len, c.cap, got, c.want)
		}
	}
}
