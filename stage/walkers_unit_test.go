package stage

import (
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/walk/cpu"
)

// The walks hold a core a walk, up to the engine's cores, from their
// request's queueing to the end of its run: a backlog holds them all, a
// probe of one walk one, a sampling request (no walks counted) one; drop
// gives back once what hold counted.
func TestWalkersHoldACoreAWalk(t *testing.T) {
	w := &walkerLoad{cores: 16}
	if got := w.WalkerCores(); got != 0 {
		t.Fatalf("no walks: %d cores held", got)
	}
	probe, sample := &batch{walks: 1}, &batch{}
	big := &batch{walks: 10_000}
	steps := []struct {
		name string
		do   func()
		want int
	}{
		{"a probe queued", func() { w.hold(probe) }, 1},
		{"a sampling request queued", func() { w.hold(sample) }, 2},
		{"a walk backlog queued", func() { w.hold(big) }, 16},
		{"the probe walked", func() { w.drop(probe) }, 16},
		{"the probe dropped again (abandoned after its run)", func() { w.drop(probe) }, 16},
		{"the backlog walked", func() { w.drop(big) }, 1},
		{"the sample walked", func() { w.drop(sample) }, 0},
	}
	for _, st := range steps {
		st.do()
		if got := w.WalkerCores(); got != st.want {
			t.Fatalf("%s: %d cores held, want %d", st.name, got, st.want)
		}
	}
}

// The cores a stage's walks may hold: the engine's workers as configured,
// every core by default, the GPU engine's too (its output is encoded on
// every core).
func TestWalkerCores(t *testing.T) {
	_, g := testGraphCached(t)
	c, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got := walkerCores(&LiveOptions{WalkerCores: 3}, c); got != 3 {
		t.Errorf("configured 3: %d", got)
	}
	if got, want := walkerCores(&LiveOptions{}, c), runtime.GOMAXPROCS(0); got != want {
		t.Errorf("the CPU engine by default: %d, want %d", got, want)
	}
	if got, want := walkerCores(&LiveOptions{}, gpuNamed{c}), runtime.GOMAXPROCS(0); got != want {
		t.Errorf("the GPU engine: %d, want %d", got, want)
	}
}

type gpuNamed struct{ *cpu.Engine }

func (gpuNamed) Name() string { return "gpu" }
