package gpu

import (
	"errors"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

func TestGroupJobsByAlgorithm(t *testing.T) {
	dw := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
	dwAlias := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true}
	dwAliasForced := walk.Algorithm{Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperAlias}
	mp := func(s ...uint8) walk.Algorithm { return walk.Algorithm{Kind: walk.MetaPath, Length: 80, Schema: s} }
	jobs := []walk.Job{
		{Tag: 0, Algorithm: dw}, {Tag: 1, Algorithm: dwAlias}, {Tag: 2, Algorithm: dw},
		{Tag: 3, Algorithm: dwAliasForced}, {Tag: 4, Algorithm: mp(0, 1)}, {Tag: 5, Algorithm: mp(0, 2)},
		{Tag: 6, Algorithm: mp(0, 1)}, {Tag: 7, Algorithm: walk.Algorithm{Kind: walk.DeepWalk, Length: 79}},
		{Tag: 8, Algorithm: walk.Algorithm{Kind: walk.MetaPath, Length: 80, Schema: []uint8{0, 1}, Stepper: walk.StepperZPRS}},
	}
	got := groupJobs(jobs)
	want := [][]int{{0, 2}, {1, 3}, {4, 6}, {5}, {7}, {8}}
	if len(got) != len(want) {
		t.Fatalf("%d groups, want %d", len(got), len(want))
	}
	for i, grp := range got {
		if len(grp) != len(want[i]) {
			t.Fatalf("group %d has %d jobs, want %v", i, len(grp), want[i])
		}
		for k, j := range grp {
			if j.Tag != want[i][k] {
				t.Fatalf("group %d job %d is tag %d, want %d", i, k, j.Tag, want[i][k])
			}
		}
	}
}

func TestCutBatches(t *testing.T) {
	a := &walk.Job{Tag: 1, Starts: make([]uint32, 10)}
	b := &walk.Job{Tag: 2, Starts: make([]uint32, 3)}
	empty := &walk.Job{Tag: 3}
	c := &walk.Job{Tag: 4, Starts: make([]uint32, 7)}
	tests := []struct {
		name string
		per  int64
		want [][]segment // job tag in seed field for brevity: compared by tag, lo, hi
	}{
		{"one batch", 100, [][]segment{{{lo: 0, hi: 10}, {lo: 0, hi: 3}, {lo: 0, hi: 7}}}},
		{"split jobs", 6, [][]segment{{{lo: 0, hi: 6}}, {{lo: 6, hi: 10}, {lo: 0, hi: 2}}, {{lo: 2, hi: 3}, {lo: 0, hi: 5}}, {{lo: 5, hi: 7}}}},
		{"exact", 20, [][]segment{{{lo: 0, hi: 10}, {lo: 0, hi: 3}, {lo: 0, hi: 7}}}},
		{"single walks", 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := cutBatches([]*walk.Job{a, b, empty, c}, tc.per)
			var walks int64
			seen := map[[2]int]bool{}
			for _, bt := range got {
				if bt.walks > tc.per || bt.walks == 0 {
					t.Fatalf("batch of %d walks, per %d", bt.walks, tc.per)
				}
				n := int64(0)
				for _, sg := range bt.segs {
					for id := sg.lo; id < sg.hi; id++ {
						k := [2]int{sg.job.Tag, id}
						if seen[k] {
							t.Fatalf("walk %v twice", k)
						}
						seen[k] = true
					}
					n += int64(sg.hi - sg.lo)
				}
				if n != bt.walks {
					t.Fatalf("batch counts %d walks, segments hold %d", bt.walks, n)
				}
				walks += n
			}
			if walks != 20 || len(seen) != 20 {
				t.Fatalf("%d walks cut, want 20", walks)
			}
			if tc.want == nil {
				return
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d batches, want %d", len(got), len(tc.want))
			}
			for i := range got {
				for k, sg := range got[i].segs {
					w := tc.want[i][k]
					if sg.lo != w.lo || sg.hi != w.hi {
						t.Fatalf("batch %d segment %d = [%d,%d), want [%d,%d)", i, k, sg.lo, sg.hi, w.lo, w.hi)
					}
				}
			}
		})
	}
}

func TestAlgorithmParamsThresholds(t *testing.T) {
	var p walkParams
	algorithmParams(&p, walk.Algorithm{Kind: walk.Node2Vec, Length: 80, P: 2, Q: 0.5, Weighted: true}, 4096)
	// f = (1/p, 1, 1/q) = (0.5, 1, 2), fmax = 2: accept 1/4, 1/2, 1.
	want := [3]uint64{1 << 30, 1 << 31, 1 << 32}
	if p.accept != want {
		t.Fatalf("accept = %v, want %v", p.accept, want)
	}
	if p.stride != 88 || p.length != 80 || p.sampler != uint64(walk.StepperRejection) || p.weighted != 1 {
		t.Fatalf("params %+v", p)
	}
	algorithmParams(&p, walk.Algorithm{Kind: walk.PPR, Length: 7, StopProb: 0.25}, 4096)
	if p.stopThreshold != 1<<30 || p.stride != 8 || p.accept != [3]uint64{} {
		t.Fatalf("ppr params %+v", p)
	}
	algorithmParams(&p, walk.Algorithm{Kind: walk.MetaPath, Length: 8, Schema: []uint8{3, 1, 4}}, 4096)
	if p.schemaLen != 3 || p.schema[0] != 3 || p.schema[2] != 4 || p.schema[3] != 0 || p.stride != 16 {
		t.Fatalf("metapath params %+v", p)
	}
}

func TestRowPitch(t *testing.T) {
	for _, c := range []struct {
		length int
		want   int64
	}{{1, 8}, {7, 8}, {8, 16}, {80, 88}, {walk.MaxLength, 65544}} {
		if got := rowPitch(c.length); got != c.want || got%8 != 0 || got < int64(c.length)+1 {
			t.Errorf("rowPitch(%d) = %d, want %d", c.length, got, c.want)
		}
	}
}

// TestMemoryPlans: each plan lists the allocations the engine makes, counts
// the largest scratch part once on top of the resident ones, and fails with
// every part, its size and the free memory named.
func TestMemoryPlans(t *testing.T) {
	const V, E = 1000, 16000
	plain := graphShape{name: "plain", vertices: V, edges: E}
	weighted := graphShape{name: "w", vertices: V, edges: E, weighted: true, labelled: true, labels: 5}
	offsets := uploadBytes((V + 1) * 8)
	tests := []struct {
		name      string
		plan      memPlan
		wantParts []string
		wantNeed  int64
	}{
		{"unweighted graph", graphPlan(plain, 0), []string{"graph.offsets", "graph.targets"}, offsets + E*4},
		{"unweighted graph, reserve", graphPlan(plain, 1<<30), []string{"graph.offsets", "graph.targets", "reserve"}, offsets + E*4 + 1<<30},
		{"weighted labelled graph", graphPlan(weighted, 0),
			[]string{"graph.offsets", "graph.targets", "graph.weights", "graph.labels", "alias.table", "alias.scratch"},
			offsets + E*4 + E*4 + E + E*16 + E*12},
		{"empty graph arrays", graphPlan(graphShape{name: "e", vertices: 3}, 0), []string{"graph.offsets"}, 64},
		{"label tables", labelTablePlan(graphShape{name: "l", vertices: V, edges: E, labelled: true, labels: 5}),
			[]string{"labels.offsets", "labels.targets"}, (V*5+1)*8 + E*4},
		// The regrouped weights and the alias scratch are freed after the
		// build: one transient part, counted on top of the tables.
		{"weighted label tables", labelTablePlan(weighted),
			[]string{"labels.offsets", "labels.targets", "labels.alias", "labels.scratch"}, (V*5+1)*8 + E*4 + E*16 + E*4 + E*12},
		{"slot", slotPlan(1, 1000, 88000, 3),
			[]string{"slot1.tasks", "slot1.seeds", "slot1.result", "slot1.lengths", "slot1.cursor", "slot1.params", "slot1.dense", "slot1.partials"},
			1000*16 + 3*8 + 88000*4*2 + 1000*4 + 8 + paramsSize + 2*4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var names []string
			for _, p := range tc.plan.parts {
				names = append(names, p.name)
			}
			if tc.wantParts != nil && strings.Join(names, " ") != strings.Join(tc.wantParts, " ") {
				t.Errorf("parts %v, want %v", names, tc.wantParts)
			}
			if got := tc.plan.need(); got != tc.wantNeed {
				t.Errorf("need %d, want %d", got, tc.wantNeed)
			}
			if err := tc.plan.check(tc.wantNeed); err != nil {
				t.Errorf("check with exactly the need free: %v", err)
			}
			err := tc.plan.check(tc.wantNeed - 1)
			var pe *MemoryPlanError
			if !errors.As(err, &pe) {
				t.Fatalf("check with one byte too few: %v, want a *MemoryPlanError", err)
			}
			if pe.Need != tc.wantNeed || pe.Free != tc.wantNeed-1 || len(pe.Parts) != len(tc.plan.parts) {
				t.Errorf("error fields %+v", pe)
			}
			msg := err.Error()
			if !strings.Contains(msg, sizeString(tc.wantNeed-1)+" free") {
				t.Errorf("message does not give the free memory: %s", msg)
			}
			for _, p := range tc.plan.parts {
				if !strings.Contains(msg, p.name+" "+sizeString(p.bytes)) {
					t.Errorf("message does not name %s and its size %s: %s", p.name, sizeString(p.bytes), msg)
				}
			}
		})
	}
}

func TestSizeString(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB (1024 B)", 3 << 29: "1.5 GiB (1610612736 B)"} {
		if got := sizeString(n); got != want {
			t.Errorf("sizeString(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPipelinedBatchWalks(t *testing.T) {
	for _, c := range []struct{ per, total, want int64 }{
		{400_000, 160_000, 40_000},                  // a stage launch of 16 x 10,000 walks: four batches
		{400_000, 16_777_216, 400_000},              // a one-shot run: the slots' size already cuts it
		{400_000, pipelinedSplitWalks - 1, 400_000}, // too small to split
		{400_000, pipelinedSplitWalks, pipelinedSplitWalks / 4},
		{10_000, 160_000, 10_000},  // the slots' size is smaller still
		{400_000, 160_001, 40_001}, // rounded up: still four batches
	} {
		got := pipelinedBatchWalks(c.per, c.total)
		if got != c.want {
			t.Errorf("pipelinedBatchWalks(%d, %d) = %d, want %d", c.per, c.total, got, c.want)
		}
		if n := (c.total + got - 1) / got; c.total >= pipelinedSplitWalks && n < 4 {
			t.Errorf("pipelinedBatchWalks(%d, %d) = %d: %d batches", c.per, c.total, got, n)
		}
	}
}
