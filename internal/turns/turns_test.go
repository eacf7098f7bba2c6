package turns

import (
	"strings"
	"sync"
	"testing"
)

// TestTurnsAreFirstComeFirstServed: turns go in ticket order, a
// ticket given back is skipped, and one that unlocks and locks again goes
// behind those already waiting.
func TestTurnsAreFirstComeFirstServed(t *testing.T) {
	tu := NewLine()
	first := tu.Take() // the turn in progress
	tu.Wait(first)
	gone := tu.Hold()
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b", "c"} {
		n := tu.Take()
		wg.Go(func() {
			tu.Wait(n)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			tu.Done()
		})
	}
	if w := tu.Waiting(); w != 5 {
		t.Errorf("waiting %d, want 5 (the turn in progress, one held, three)", w)
	}
	gone.Release()
	tu.Done() // a, b, c in order; then the one that ended its turn
	tu.Lock()
	mu.Lock()
	got := strings.Join(order, "")
	mu.Unlock()
	tu.Done()
	wg.Wait()
	if got != "abc" {
		t.Errorf("turns in order %q, want abc before the next lock", got)
	}
	if w := tu.Waiting(); w != 0 {
		t.Errorf("waiting %d after every turn, want 0", w)
	}
}
