package stage

import "testing"

// The stage's registry exposes the collector's CPU and the bytes the heap
// allocated, so that a load run can say what a stage's allocations cost
// beside a live ingest (scripts/stage-load.sh's go-totals.txt).
func TestRegistryExposesCollectorCost(t *testing.T) {
	mfs, err := newRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"go_cpu_classes_gc_total_cpu_seconds_total": false, "go_gc_heap_allocs_bytes_total": false, "go_goroutines": false}
	for _, mf := range mfs {
		if _, ok := want[mf.GetName()]; ok {
			want[mf.GetName()] = true
		}
	}
	for name, ok := range want {
		if !ok {
			t.Errorf("no %s among the stage's metrics", name)
		}
	}
}
