//go:build cuda

package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/visits"
)

// Visit counting on the device (visits.DeviceVisitCounter): kernels/visits.cuh
// walks each (query, seed) in one block and counts into a hash table per
// query in device memory; the used slots are compacted and cut on the device
// to each query's best visitLimit candidates, and only those come back; the
// host applies the exclusions and cuts the top k (visits.VisitCandidates).
// Queries go in launches whose tables fit visitTableBudget.

// visitTask mirrors ws::VisitTask (40 bytes).
type visitTask struct {
	start, query, seedIndex, table uint32
	budget, cap, rng               uint64
}

const visitTaskBytes = int64(unsafe.Sizeof(visitTask{}))

// visitTableBudget bounds the tables of one launch (8 bytes a slot).
const visitTableBudget = 4 << 30

var (
	_ visits.DeviceVisitCounter = (*Engine)(nil)
	_ visits.DeviceVisitBatcher = (*Engine)(nil)
)

// deviceCounts says whether the device kernels count p: first-order walks
// on an O(1) sampler (DeepWalk, PPR; uniform or alias) without early
// stopping, which needs the host's walk order.
func deviceCounts(p visits.VisitParams) bool {
	a := p.Algorithm
	s := a.ResolvedStepper()
	return (a.Kind == walk.DeepWalk || a.Kind == walk.PPR) && (s == walk.StepperUniform || s == walk.StepperAlias) && p.NP == 0
}

// CountVisitsOnDevice implements visits.DeviceVisitCounter.
func (e *Engine) CountVisitsOnDevice(ctx context.Context, p visits.VisitParams, queries []visits.VisitQuery) ([]visits.VisitResult, visits.VisitStats, bool, error) {
	res, st, handled, err := e.CountVisitCallsOnDevice(ctx, []visits.VisitCall{{Params: p, Queries: queries}})
	if err != nil || !handled[0] {
		return nil, visits.VisitStats{}, err != nil, err
	}
	return res[0], st[0], true, nil
}

// CountVisitCallsOnDevice implements visits.DeviceVisitBatcher: the calls
// the kernels count (deviceCounts) whose walks share their kernel
// parameters go in the same launches, each task keyed by its own call's
// seed and its query's index in the call, so each call's counts are those
// it gets alone; many small requests then fill the device together.
func (e *Engine) CountVisitCallsOnDevice(ctx context.Context, calls []visits.VisitCall) ([][]visits.VisitResult, []visits.VisitStats, []bool, error) {
	res := make([][]visits.VisitResult, len(calls))
	st := make([]visits.VisitStats, len(calls))
	handled := make([]bool, len(calls))
	nv := int64(e.g.NumVertices())
	// Groups of calls with the same kernel parameters, in call order.
	var groups [][]int
	var keys []walkParams
	for c, call := range calls {
		// A streamed graph is not on the device whole: the host counts
		// visits from Run's walks.
		if e.streamed != nil || !deviceCounts(call.Params) || visitTableBits(call.Params, call.Queries, nv) > 31 {
			continue
		}
		var k walkParams
		algorithmParams(&k, call.Params.Algorithm, e.cfg.warpThreshold)
		g := slices.Index(keys, k)
		if g < 0 {
			g = len(keys)
			keys, groups = append(keys, k), append(groups, nil)
		}
		groups[g] = append(groups[g], c)
		handled[c] = true
	}
	if len(groups) == 0 {
		return res, st, handled, nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, handled, errors.New("gpu: engine closed")
	}
	if e.broken != nil {
		return nil, nil, handled, e.broken
	}
	t0 := time.Now()
	e.visitPhases = [3]time.Duration{}
	for _, grp := range groups {
		if err := e.countVisitCalls(ctx, calls, grp, res, st); err != nil {
			return nil, nil, handled, e.afterError(err)
		}
	}
	var all visits.VisitStats
	for _, c := range slices.Concat(groups...) {
		for _, r := range res[c] {
			st[c].Walks += r.Walks
			st[c].Steps += r.Steps
			st[c].Candidates += int64(len(r.Candidates))
		}
		all.Walks += st[c].Walks
		all.WalkedSteps += st[c].WalkedSteps
	}
	e.lastMu.Lock()
	e.last = walk.RunStats{Walks: all.Walks, Steps: all.WalkedSteps, Wall: time.Since(t0), Compute: time.Since(t0),
		TableBytes: e.tableBytes, TableBuild: e.tableBuild}
	e.lastMu.Unlock()
	return res, st, handled, nil
}

// visitItem is one query of a counting group: its call and its index in
// the call.
type visitItem struct{ call, query int }

// countVisitCalls counts the queries of calls grp (one kernel parameter
// set) into res and st, in launches whose tables fit visitTableBudget
// (device thread taken here).
func (e *Engine) countVisitCalls(ctx context.Context, calls []visits.VisitCall, grp []int, res [][]visits.VisitResult, st []visits.VisitStats) error {
	nv := int64(e.g.NumVertices())
	var items []visitItem
	tbits := uint32(0)
	for _, c := range grp {
		call := calls[c]
		res[c] = make([]visits.VisitResult, len(call.Queries))
		st[c].Queries = int64(len(call.Queries))
		for q := range call.Queries {
			items = append(items, visitItem{c, q})
		}
		tbits = max(tbits, visitTableBits(call.Params, call.Queries, nv))
	}
	slotBytes := int64(8) << tbits
	per := int(max(1, min(int64(len(items)), visitTableBudget/slotBytes)))
	maxTasks := 0
	for lo := 0; lo < len(items); lo += per {
		n := 0
		for _, it := range items[lo:min(lo+per, len(items))] {
			n += len(calls[it.call].Queries[it.query].Starts)
		}
		maxTasks = max(maxTasks, n)
	}
	p0 := calls[grp[0]].Params
	var params walkParams
	algorithmParams(&params, p0.Algorithm, e.cfg.warpThreshold)
	params.offsets, params.targets = uint64(e.dOffsets), uint64(e.dTargets)
	if p0.Algorithm.Weighted && p0.Algorithm.ResolvedStepper() == walk.StepperAlias {
		params.weights, params.alias = uint64(e.dWeights), uint64(e.dAlias)
	}
	e.placedParams(&params)
	fnName := "visits_count_static"
	if p0.Algorithm.Kind == walk.PPR {
		fnName = "visits_count_ppr"
	}
	return e.dev.do(func() (err error) {
		fnCount, err := e.mod.Function(fnName)
		if err != nil {
			return fmt.Errorf("gpu: kernel %s: %w", fnName, err)
		}
		fnCompact, err := e.mod.Function("visits_compact")
		if err != nil {
			return fmt.Errorf("gpu: kernel visits_compact: %w", err)
		}
		var dParams, dTasks, dTables, dOut, dUsed, dLimits cu.DevicePtr
		var vb *visitBuffers
		defer func() {
			if vb != nil {
				vb.wait() // no top k still reads a pinned buffer
			}
			e.free("visits.params", &dParams)
			e.free("visits.tasks", &dTasks)
			e.free("visits.tables", &dTables)
			e.free("visits.out", &dOut)
			e.free("visits.used", &dUsed)
			e.free("visits.limits", &dLimits)
		}()
		for _, a := range []struct {
			name string
			p    *cu.DevicePtr
			n    int64
		}{{"visits.params", &dParams, paramsSize}, {"visits.tasks", &dTasks, int64(maxTasks) * visitTaskBytes},
			{"visits.tables", &dTables, int64(per) * slotBytes}, {"visits.out", &dOut, int64(maxTasks) * 24},
			{"visits.used", &dUsed, int64(per) * 8}, {"visits.limits", &dLimits, int64(per) * 4}} {
			if *a.p, err = e.alloc(a.name, a.n); err != nil {
				return err
			}
		}
		if err := e.copyHtoD(dParams, unsafe.Pointer(&params), paramsSize); err != nil {
			return fmt.Errorf("gpu: copy visits params: %w", err)
		}
		vb = &visitBuffers{fnName: fnName, fnCount: fnCount, fnCompact: fnCompact, dParams: dParams, dTasks: dTasks,
			dTables: dTables, dOut: dOut, dUsed: dUsed, dLimits: dLimits, tbits: tbits, slotBytes: slotBytes,
			tasks: make([]visitTask, 0, maxTasks), owner: make([]int, 0, maxTasks), out: make([]uint64, 3*maxTasks),
			used: make([]uint64, per), limits: make([]uint32, per)}
		for lo := 0; lo < len(items); lo += per {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := e.countVisitGroup(vb, calls, items[lo:min(lo+per, len(items))], res, st); err != nil {
				return err
			}
		}
		return nil
	})
}

// visitTableBits is log2 of the slots of every query's table in a launch:
// twice the distinct vertices a query can reach (its steps, at most nv), so
// a table is at most half full.
func visitTableBits(p visits.VisitParams, queries []visits.VisitQuery, nv int64) uint32 {
	reach := int64(0)
	for _, q := range queries {
		steps := p.StepsPerQuery
		if p.WalksPerSeed > 0 {
			steps = int64(p.WalksPerSeed) * int64(len(q.Starts)) * int64(p.Algorithm.Length)
		}
		reach = max(reach, min(steps, nv))
	}
	return uint32(max(10, bits.Len64(uint64(2*reach-1))))
}

// visitBuffers are the kernels and the device and host buffers that the
// launches of one CountVisitsOnDevice call share.
type visitBuffers struct {
	fnName                                string
	fnCount, fnCompact                    cu.Function
	dParams, dTasks, dTables, dOut, dUsed cu.DevicePtr
	dLimits                               cu.DevicePtr
	tbits                                 uint32
	slotBytes                             int64
	tasks                                 []visitTask
	owner                                 []int // query of each task
	out, used                             []uint64
	limits                                []uint32 // visitLimit of each query of a launch
	// Launches alternate between the engine's two pinned slot buffers
	// (Engine.visitHost): the top k of one launch is cut on the host while
	// the next one counts. offs[b][i] is query i's first slot in buffer
	// b; done[b] is closed when buffer b's top k has finished.
	turn int
	offs [2][]int64
	done [2]chan struct{}
}

// wait waits for the top k of both buffers.
func (vb *visitBuffers) wait() {
	for _, d := range vb.done {
		if d != nil {
			<-d
		}
	}
}

// pinnedSlots is a pinned host buffer of visit-table slots, kept by the
// engine from call to call (pinning memory costs about as much as the
// copies it speeds up) and freed by Close.
type pinnedSlots struct {
	p   unsafe.Pointer
	cap int64 // slots
}

// ensure grows the buffer to n slots (device thread).
func (b *pinnedSlots) ensure(e *Engine, n int64) error {
	if b.cap >= n {
		return nil
	}
	c := max(n, 2*b.cap, 1<<20)
	e.hostFree(b.p)
	b.p, b.cap = nil, 0
	p, err := e.hostAlloc(c * 8)
	if err != nil {
		return err
	}
	b.p, b.cap = p, c
	return nil
}

func (b *pinnedSlots) release(e *Engine) {
	e.hostFree(b.p)
	b.p, b.cap = nil, 0
}

// appendVisitTasks appends a task per seed with walks to run of the
// launch's items (table i is item i's), keyed by its call's seed and its
// query's index in the call, and the item of each task to owner.
func appendVisitTasks(tasks []visitTask, owner []int, calls []visits.VisitCall, items []visitItem) ([]visitTask, []int) {
	for i, it := range items {
		p := calls[it.call].Params
		q := calls[it.call].Queries[it.query]
		var budgets []int64
		if p.StepsPerQuery > 0 {
			budgets = visits.SplitSteps(p.StepsPerQuery, q.Weights, len(q.Starts))
		}
		for k, s := range q.Starts {
			t := visitTask{start: s, query: uint32(it.query), seedIndex: uint32(k), table: uint32(i),
				budget: math.MaxUint64, cap: uint64(p.WalksPerSeed), rng: p.Seed}
			if budgets != nil {
				t.budget, t.cap = uint64(budgets[k]), uint64(budgets[k])
			}
			if t.cap == 0 {
				continue
			}
			tasks = append(tasks, t)
			owner = append(owner, i)
		}
	}
	return tasks, owner
}

// visitLimit is how many of a query's best-visited vertices the device
// keeps (0: all): its top k plus every vertex it may exclude, so that the
// host's cut after exclusions and min_visits sees the same k candidates as
// from the whole table. Visit counts below min_visits only ever drop the
// tail of that order.
func visitLimit(g *graph.Graph, p visits.VisitParams, q visits.VisitQuery) uint32 {
	n := int64(p.TopK)
	for _, s := range q.Starts {
		if p.ExcludeSeeds {
			n++
		}
		if p.ExcludeNeighbors {
			n += int64(g.Degree(s))
		}
	}
	if n <= 0 || n >= math.MaxUint32 {
		return 0
	}
	return uint32(n)
}

// countVisitGroup counts the queries of items in one launch (their tables
// fit visitTableBudget) into res and st. It runs on the device thread.
func (e *Engine) countVisitGroup(vb *visitBuffers, calls []visits.VisitCall, items []visitItem, res [][]visits.VisitResult, st []visits.VisitStats) error {
	vb.tasks, vb.owner = appendVisitTasks(vb.tasks[:0], vb.owner[:0], calls, items)
	tasks, owner := vb.tasks, vb.owner
	nq := len(items)
	t0 := time.Now()
	if err := cu.MemsetD32(vb.dTables, 0, int64(nq)*vb.slotBytes/4); err != nil {
		return fmt.Errorf("gpu: clear visit tables: %w", err)
	}
	if len(tasks) > 0 {
		if err := e.copyHtoD(vb.dTasks, unsafe.Pointer(&tasks[0]), int64(len(tasks))*visitTaskBytes); err != nil {
			return fmt.Errorf("gpu: copy visit tasks: %w", err)
		}
		if err := launch(vb.fnCount, len(tasks), visitThreads, cu.Stream{},
			[]uint64{uint64(vb.dParams), uint64(vb.dTasks), uint64(vb.dTables), uint64(vb.tbits), uint64(vb.dOut)}); err != nil {
			return fmt.Errorf("gpu: %s: %w", vb.fnName, err)
		}
	}
	for i, it := range items {
		vb.limits[i] = visitLimit(e.g, calls[it.call].Params, calls[it.call].Queries[it.query])
	}
	if err := e.copyHtoD(vb.dLimits, unsafe.Pointer(&vb.limits[0]), int64(nq)*4); err != nil {
		return fmt.Errorf("gpu: copy visit limits: %w", err)
	}
	if err := launch(vb.fnCompact, nq, visitThreads, cu.Stream{}, []uint64{uint64(vb.dTables), uint64(vb.tbits), uint64(vb.dUsed), uint64(vb.dLimits)}); err != nil {
		return fmt.Errorf("gpu: visits_compact: %w", err)
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: visit counting: %w", err)
	}
	if len(tasks) > 0 {
		if err := cu.MemcpyDtoH(unsafe.Pointer(&vb.out[0]), vb.dOut, int64(len(tasks))*24); err != nil {
			return fmt.Errorf("gpu: copy visit totals: %w", err)
		}
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&vb.used[0]), vb.dUsed, int64(nq)*8); err != nil {
		return fmt.Errorf("gpu: copy visit table sizes: %w", err)
	}
	for k, i := range owner {
		it := items[i]
		res[it.call][it.query].Steps += int64(vb.out[3*k])
		res[it.call][it.query].Walks += int64(vb.out[3*k+1])
		st[it.call].WalkedSteps += int64(vb.out[3*k+2])
	}
	for i, it := range items {
		if i == 0 || items[i-1].call != it.call {
			st[it.call].Runs++ // a run for each call with queries in this launch
		}
	}
	t1 := time.Now()
	b := vb.turn
	vb.turn ^= 1
	if vb.done[b] != nil {
		<-vb.done[b] // the top k two launches back still reads buffer b
	}
	t2 := time.Now()
	if err := e.copyVisitSlots(vb, b, nq); err != nil {
		return err
	}
	e.visitPhases[0] += t1.Sub(t0)
	e.visitPhases[1] += time.Since(t2)
	e.visitPhases[2] += t2.Sub(t1)
	// The top k of each query, cut on every core while the next launch
	// counts: after the device's cut each query leaves about k plus its
	// exclusions of slots, but a launch holds thousands of queries.
	slots := unsafe.Slice((*uint64)(e.visitHost[b].p), e.visitHost[b].cap)
	offs, done := vb.offs[b], make(chan struct{})
	vb.done[b] = done
	items = slices.Clone(items) // the caller's slice is the next launch's
	go func() {
		defer close(done)
		parallelQueries(nq, func(i int) {
			it := items[i]
			c := calls[it.call]
			res[it.call][it.query].Candidates = visits.VisitCandidates(e.g, c.Params, c.Queries[it.query], slots[offs[i]:offs[i+1]])
		})
	}()
	return nil
}

// copyVisitSlots brings the used slots of a launch's nq queries back into
// pinned buffer b, query after query: one asynchronous copy each and one
// synchronisation, where a copy to pageable memory per query waited for
// each (device thread).
func (e *Engine) copyVisitSlots(vb *visitBuffers, b, nq int) error {
	offs := append(vb.offs[b][:0], 0)
	for i := range nq {
		offs = append(offs, offs[i]+int64(vb.used[i]))
	}
	vb.offs[b] = offs
	if err := e.visitHost[b].ensure(e, offs[nq]); err != nil {
		return err
	}
	for i := range nq {
		u := int64(vb.used[i])
		if u == 0 {
			continue
		}
		dst := unsafe.Add(e.visitHost[b].p, offs[i]*8)
		if err := e.copyDtoHAsync(dst, vb.dTables+cu.DevicePtr(int64(i)*vb.slotBytes), u*8, cu.Stream{}); err != nil {
			_ = cu.Synchronize()
			return fmt.Errorf("gpu: copy visit counts: %w", err)
		}
	}
	if err := cu.Synchronize(); err != nil {
		return fmt.Errorf("gpu: copy visit counts: %w", err)
	}
	return nil
}

// parallelQueries calls fn(i) for i in [0, n) on every core.
func parallelQueries(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		}()
	}
	wg.Wait()
}
