//go:build cuda

package gpu

import (
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// TestMultiMatchesOneGPU: walks spread over several engines equal one
// engine's, walk for walk, for every sampler. On a machine with several
// GPUs the engines are one per device; on one GPU, two engines share it
// (the simulated run), and a third pairs an all-device engine with one
// under a placement plan, so device and host memory serve one run.
func TestMultiMatchesOneGPU(t *testing.T) {
	g := testGraph(t)
	n, err := DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	setups := map[string][][]Option{
		"two engines on device 0":            {{WithDevice(0)}, {WithDevice(0)}},
		"device memory and a placement plan": {{WithDevice(0)}, {WithDevice(0), WithDeviceFraction(0.3)}},
	}
	if n > 1 {
		var all [][]Option
		for d := range n {
			all = append(all, []Option{WithDevice(d)})
		}
		setups["one engine per device"] = all
	}
	one := newEngine(t, g)
	starts := allStarts(g, 2)
	jobs := func(a walk.Algorithm) []walk.Job {
		return []walk.Job{{Tag: 1, Algorithm: a, Seed: 11, Starts: starts}, {Tag: 2, Algorithm: a, Seed: 12, Starts: starts[:1001]}}
	}
	want := map[string]map[int][][]uint32{}
	for _, c := range placementCases {
		want[c.name] = collect(t, one, jobs(c.alg))
	}
	for name, opts := range setups {
		var engines []walk.Engine
		for _, o := range opts {
			engines = append(engines, newEngine(t, g, o...))
		}
		m, err := NewMulti(engines...)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range placementCases {
			t.Run(name+"/"+c.name, func(t *testing.T) {
				got := collect(t, m, jobs(c.alg))
				for tag, ws := range want[c.name] {
					for id, w := range ws {
						if !equal(got[tag][id], w) {
							t.Fatalf("job %d walk %d: %v over the engines, %v on one", tag, id, got[tag][id], w)
						}
					}
				}
				if st := m.LastRunStats(); st.Walks != int64(len(starts)+1001) || st.Compute <= 0 {
					t.Fatalf("stats %+v", st)
				}
			})
		}
	}
}
