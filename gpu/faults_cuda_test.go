//go:build cuda

package gpu

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// These tests break the engine on purpose: an allocation or a copy that
// fails (failure injection through Engine.inject), a sticky error, a graph
// that does not fit. After each, nothing may leak and the next Run must
// give the walks a clean engine gives. They are the ones to run under
// compute-sanitizer (memcheck) too:
//
//	compute-sanitizer --tool memcheck --leak-check full .dev/gpu.test -test.run 'Failure|Injected|DoesNotFit'

// faultJobs needs the label tables (built in the first Run) and two
// groups of batches through both slots.
func faultJobs(g *graph.Graph) []walk.Job {
	starts := allStarts(g, 1)
	return []walk.Job{
		{Tag: 1, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 10, Schema: []uint8{0, 1, 2}, Weighted: true}, Seed: 5, Starts: starts},
		{Tag: 2, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10, Weighted: true}, Seed: 6, Starts: starts},
	}
}

func faultOptions() []Option {
	return []Option{WithMaxBatchWalks(1000), WithChunkWalks(300), WithHostBufferBytes(1 << 20)}
}

// meter holds the primary context open for the whole test, so that
// engines closing in between do not release it, and reads free memory.
type meter struct{ d *device }

func newMeter(t *testing.T) meter {
	t.Helper()
	d, err := openDevice(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.close)
	return meter{d}
}

func (m meter) free(t *testing.T) int64 {
	t.Helper()
	var free int64
	if err := m.d.do(func() error {
		var err error
		free, _, err = cu.MemInfo()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return free
}

func runDiscard(e *Engine, jobs []walk.Job) error {
	return e.Run(context.Background(), jobs, func(walk.Chunk) error { return nil })
}

// checkRecords: every live device allocation is one the engine records
// (no pointer lost between a failed step and its cleanup).
func checkRecords(t *testing.T, e *Engine, when string) {
	t.Helper()
	var live, recorded int
	_ = e.dev.do(func() error { live, recorded = e.liveDev, len(e.allocs); return nil })
	if live != recorded {
		t.Fatalf("%s: %d device allocations live, %d recorded: %v", when, live, recorded, e.allocs)
	}
}

// closeAndCheck closes e and checks that it freed everything: its
// counters, and free device memory back to base.
func closeAndCheck(t *testing.T, e *Engine, m meter, base int64, when string) {
	t.Helper()
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if e.liveDev != 0 || e.liveHost != 0 {
		t.Fatalf("%s: after Close %d device and %d pinned allocations still live", when, e.liveDev, e.liveHost)
	}
	if f := m.free(t); f != base {
		t.Fatalf("%s: free device memory %d after Close, %d before New (%+d)", when, f, base, f-base)
	}
}

func sameWalks(t *testing.T, got, want map[int][][]uint32, when string) {
	t.Helper()
	for tag := range want {
		for id := range want[tag] {
			if !equal(got[tag][id], want[tag][id]) {
				t.Fatalf("%s: job %d walk %d differs from a clean engine's:\n%v\n%v", when, tag, id, got[tag][id], want[tag][id])
			}
		}
	}
}

// TestAllocationFailure fails each allocation of a first Run in turn (the
// label tables, their scratch, both slots' device and pinned buffers): the
// Run returns the error, not ErrEngineBroken; no allocation is lost; the
// next Run completes with a clean engine's walks; Close frees all.
func TestAllocationFailure(t *testing.T) {
	g := testGraph(t)
	m := newMeter(t)
	jobs := faultJobs(g)
	// A clean engine first: the context reserves its kernels' local
	// memory at their first launch and keeps it, which is not a leak.
	clean := newEngine(t, g, faultOptions()...)
	want := collect(t, clean, jobs)
	_ = clean.Close()
	base := m.free(t)
	for n := 1; ; n++ {
		e, err := openEngine(g, faultOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		f := &faults{allocAt: n}
		e.inject = f
		err = runDiscard(e, jobs)
		e.inject = nil
		if err == nil {
			if n == 1 {
				t.Fatal("the first Run allocated nothing")
			}
			t.Logf("a first Run makes %d allocations; each failed once", n-1)
			closeAndCheck(t, e, m, base, "after the clean run")
			return
		}
		when := "allocation " + strconv.Itoa(n)
		if !errors.Is(err, cu.OutOfMemory) || errors.Is(err, walk.ErrEngineBroken) {
			t.Fatalf("%s failed: Run returned %v, want the injected out-of-memory error, not ErrEngineBroken", when, err)
		}
		checkRecords(t, e, when)
		got := collect(t, e, jobs)
		sameWalks(t, got, want, when)
		checkRecords(t, e, when+", then a clean run")
		closeAndCheck(t, e, m, base, when)
		if n > 200 {
			t.Fatal("more than 200 allocations in one Run")
		}
	}
}

// TestCopyFailure fails each memory copy of a Run in turn (inputs, lengths,
// totals, packed walks; one slot failing while the other holds a batch):
// the Run returns the error, the streams are drained, nothing leaks, and
// the next Run gives a clean engine's walks.
func TestCopyFailure(t *testing.T) {
	g := testGraph(t)
	m := newMeter(t)
	jobs := faultJobs(g)
	// A clean engine first: the context reserves its kernels' local
	// memory at their first launch and keeps it, which is not a leak.
	clean := newEngine(t, g, faultOptions()...)
	want := collect(t, clean, jobs)
	_ = clean.Close()
	base := m.free(t)
	e, err := openEngine(g, faultOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	sameWalks(t, collect(t, e, jobs), want, "a first run") // the slots and tables exist from here on
	for n := 1; ; n++ {
		e.inject = &faults{copyAt: n}
		err := runDiscard(e, jobs)
		e.inject = nil
		if err == nil {
			t.Logf("a Run makes %d copies; each failed once", n-1)
			break
		}
		when := "copy " + strconv.Itoa(n)
		if !errors.Is(err, cu.InvalidValue) || errors.Is(err, walk.ErrEngineBroken) {
			t.Fatalf("%s failed: Run returned %v, want the injected error, not ErrEngineBroken", when, err)
		}
		checkRecords(t, e, when)
		sameWalks(t, collect(t, e, jobs), want, when)
		if n > 500 {
			t.Fatal("more than 500 copies in one Run")
		}
	}
	closeAndCheck(t, e, m, base, "after the copy failures")
}

// TestInjectedStickyErrorBreaksEngine: a sticky error code (here injected
// into a copy, so the context in fact survives) makes Run return
// walk.ErrEngineBroken, then and on every later Run.
func TestInjectedStickyErrorBreaksEngine(t *testing.T) {
	g := testGraph(t)
	e := newEngine(t, g, faultOptions()...)
	jobs := faultJobs(g)
	e.inject = &faults{copyAt: 9, err: cu.IllegalAddress}
	err := runDiscard(e, jobs)
	e.inject = nil
	if !errors.Is(err, walk.ErrEngineBroken) || !errors.Is(err, cu.IllegalAddress) {
		t.Fatalf("Run returned %v, want ErrEngineBroken wrapping IllegalAddress", err)
	}
	if err := runDiscard(e, jobs); !errors.Is(err, walk.ErrEngineBroken) {
		t.Fatalf("the next Run returned %v, want ErrEngineBroken", err)
	}
}

// TestIllegalAddressBreaksEngine makes a kernel read through a bad pointer:
// a real sticky error, which kills the context for the rest of the
// process, so the test runs itself in a child process.
func TestIllegalAddressBreaksEngine(t *testing.T) {
	if os.Getenv("WALKSTAGE_GPU_STICKY_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestIllegalAddressBreaksEngine$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), "WALKSTAGE_GPU_STICKY_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "broken as expected") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	g := testGraph(t)
	e := newEngine(t, g, faultOptions()...)
	jobs := []walk.Job{{Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 10}, Seed: 1, Starts: allStarts(g, 1)}}
	collect(t, e, jobs)
	targets := e.dTargets
	e.dTargets = 16 // the kernel reads targets through this: an illegal address
	err := runDiscard(e, jobs)
	e.dTargets = targets
	if !errors.Is(err, walk.ErrEngineBroken) || !isSticky(err) {
		t.Fatalf("Run returned %v, want ErrEngineBroken wrapping a sticky error", err)
	}
	if err2 := runDiscard(e, jobs); !errors.Is(err2, walk.ErrEngineBroken) {
		t.Fatalf("the next Run returned %v, want ErrEngineBroken", err2)
	}
	t.Logf("broken as expected: %v", err)
}

// TestGraphDoesNotFit: New checks its memory plan before allocating: a
// reserve larger than the device fails with the plan, part by part, and
// leaves no allocation behind.
func TestGraphDoesNotFit(t *testing.T) {
	g := testGraph(t)
	m := newMeter(t)
	base := m.free(t)
	// Even the offsets and relocated starts, which a placement plan keeps
	// on the device, do not fit.
	_, err := openEngine(g, WithReserveBytes(1<<50))
	var pe *MemoryPlanError
	if !errors.As(err, &pe) {
		t.Fatalf("New returned %v, want a *MemoryPlanError", err)
	}
	for _, part := range []string{"graph.offsets", "graph.place"} {
		if !strings.Contains(err.Error(), part+" ") {
			t.Errorf("the error does not name %s: %v", part, err)
		}
	}
	if pe.Free > base+(64<<20) || pe.Need <= pe.Free {
		t.Errorf("plan error %+v (free before New %d)", pe, base)
	}
	if f := m.free(t); f != base {
		t.Fatalf("free device memory %d after the failed New, %d before (%+d)", f, base, f-base)
	}
	t.Log(err)
}

func withFaults(f *faults) Option { return func(c *config) { c.inject = f } }

// TestNewFailure fails each allocation and each copy New makes (the graph
// upload, the alias table and its scratch, prepared slots) in turn: New
// returns the error and leaves nothing allocated.
func TestNewFailure(t *testing.T) {
	g := testGraph(t)
	m := newMeter(t)
	clean := newEngine(t, g, faultOptions()...)
	collect(t, clean, faultJobs(g))
	_ = clean.Close()
	base := m.free(t)
	opts := append(faultOptions(), WithPreparedSlots(10))
	for _, c := range []struct {
		kind string
		arm  func(n int) *faults
		want error
	}{
		{"allocation", func(n int) *faults { return &faults{allocAt: n} }, cu.OutOfMemory},
		{"copy", func(n int) *faults { return &faults{copyAt: n} }, cu.InvalidValue},
	} {
		for n := 1; ; n++ {
			e, err := openEngine(g, append(opts, withFaults(c.arm(n)))...)
			if err == nil {
				t.Logf("New: %d %s calls, each failed once", n-1, c.kind)
				e.inject = nil
				collect(t, e, faultJobs(g))
				closeAndCheck(t, e, m, base, "after New")
				break
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("%s %d failed: New returned %v, want the injected error", c.kind, n, err)
			}
			if f := m.free(t); f != base {
				t.Fatalf("%s %d failed: free device memory %d after New, %d before (%+d)", c.kind, n, f, base, f-base)
			}
			if n > 100 {
				t.Fatalf("more than 100 %ss in New", c.kind)
			}
		}
	}
}
