package health

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestHealthHoldsUntilTheHolderSucceeds: each holder lets go of a
// dependency only by its own success (or its end), so a passing probe
// never hides a stuck retry; a probe that passes after failing wakes the
// retries sleeping out their back-off.
func TestHealthHoldsUntilTheHolderSucceeds(t *testing.T) {
	var changes []string
	h := New(Options{OnChange: func(dep string, up bool) { changes = append(changes, fmt.Sprintf("%s=%v", dep, up)) }})
	fault := errors.New("503 SlowDown")
	back := h.Recovered(Store)

	h.Down(Store, ProbeHolder, fault)
	h.Down(Store, "batch#1", fault)
	h.Down(Store, "batch#1", fault)
	h.Up(Store, ProbeHolder)
	select {
	case <-back:
	default:
		t.Error("the probe passed after failing, but sleeping retries were not woken")
	}
	err := h.Err()
	if err == nil || !strings.Contains(err.Error(), "batch failing") || !strings.Contains(err.Error(), "(2 attempts)") ||
		strings.Contains(err.Error(), "probe") {
		t.Fatalf("after the probe passed: %v", err)
	}
	if d := h.Up(Store, "batch#2"); d != 0 || h.Err() == nil {
		t.Fatal("another holder's success let go of batch#1's hold")
	}
	h.Down(Broker, "publish#3", fault)
	h.Release("publish#3")
	if d := h.Up(Store, "batch#1"); d <= 0 || h.Err() != nil {
		t.Fatalf("all holders gone: outage %v, err %v", d, h.Err())
	}
	if got := strings.Join(changes, " "); got != "object_store=false broker=false broker=true object_store=true" {
		t.Errorf("changes %s", got)
	}
	// A probe that passes without having failed wakes nobody.
	back = h.Recovered(Store)
	h.Down(Store, "batch#4", fault)
	h.Up(Store, ProbeHolder)
	select {
	case <-back:
		t.Error("woken without a recovery")
	default:
	}
	// A batch that failed on the engine, then found it broken, leaves it
	// down when it lets go.
	changes = nil
	h.Down(Engine, "batch#5", fault)
	h.BreakEngine(errors.New("illegal address"))
	h.Release("batch#5")
	if got := strings.Join(changes, " "); strings.Contains(got, "engine=true") || h.Err() == nil {
		t.Errorf("broken engine: changes %q, err %v", got, h.Err())
	}
}
