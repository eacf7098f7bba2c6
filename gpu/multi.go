package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/walkstage/walkstage/graphsample"

	"github.com/walkstage/walkstage/walk"
)

// Multi runs walks data-parallel over several engines, one per GPU of the
// host, each holding the whole graph (WALKSTAGE_GPUS). A Run's walks, job
// after job in walk-id order, are cut into one contiguous share per engine;
// the shares run at the same time and their chunks are merged into the one
// emit stream. A share keeps the ids its walks have in the whole job
// (walk.Job.FirstWalk), and Philox keys do not depend on the device, so the
// walks are those of a one-GPU run, walk for walk.
type Multi struct {
	engines []walk.Engine
	lastMu  sync.Mutex
	last    walk.RunStats
}

var (
	_ walk.Engine        = (*Multi)(nil)
	_ walk.StatsReporter = (*Multi)(nil)
	_ Placer             = (*Multi)(nil)
	_ Partitioned        = (*Multi)(nil)
)

// NewMulti spreads runs over engines (at least one), which it owns: Close
// closes them.
func NewMulti(engines ...walk.Engine) (*Multi, error) {
	if len(engines) == 0 {
		return nil, errors.New("gpu: a multi-GPU engine needs at least one engine")
	}
	return &Multi{engines: engines}, nil
}

// Name implements walk.Engine: the engines' name ("gpu").
func (m *Multi) Name() string { return m.engines[0].Name() }

// Engines is the number of engines runs are spread over.
func (m *Multi) Engines() int { return len(m.engines) }

// Placement is the first engine's placement plan (every engine makes the
// same one for the same graph and memory), nil when it has none.
func (m *Multi) Placement() *Placement {
	if p, ok := m.engines[0].(Placer); ok {
		return p.Placement()
	}
	return nil
}

// Stripes is the engines' partitioned copy of the graph (WithStripes), nil
// when each engine holds the graph itself.
func (m *Multi) Stripes() *Stripes {
	if p, ok := m.engines[0].(Partitioned); ok {
		return p.Stripes()
	}
	return nil
}

var _ graphsample.DeviceSampler = (*Multi)(nil)

// SamplesOnDevice implements graphsample.DeviceSampler: the first engine samples
// what its device takes (sampling batches are not split over the GPUs).
func (m *Multi) SamplesOnDevice(p graphsample.SampleParams) bool {
	ds, ok := m.engines[0].(graphsample.DeviceSampler)
	return ok && ds.SamplesOnDevice(p)
}

// SampleRangeOnDevice implements graphsample.DeviceSampler on the first engine.
func (m *Multi) SampleRangeOnDevice(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int) ([][]graphsample.SampledEdge, graphsample.SampleStats, error) {
	ds, ok := m.engines[0].(graphsample.DeviceSampler)
	if !ok {
		return nil, graphsample.SampleStats{}, fmt.Errorf("gpu: engine %s does not sample on a device", m.engines[0].Name())
	}
	return ds.SampleRangeOnDevice(ctx, p, starts, first, count)
}

var _ graphsample.ColumnSampler = (*Multi)(nil)

// SampleColumnsOnDevice implements graphsample.ColumnSampler on the first
// engine (as columns it built when it is a ColumnSampler).
func (m *Multi) SampleColumnsOnDevice(ctx context.Context, p graphsample.SampleParams, starts []uint32, first, count int, into *graphsample.Columns) (graphsample.SampleStats, error) {
	if cs, ok := m.engines[0].(graphsample.ColumnSampler); ok {
		return cs.SampleColumnsOnDevice(ctx, p, starts, first, count, into)
	}
	edges, st, err := m.SampleRangeOnDevice(ctx, p, starts, first, count)
	if err != nil {
		return graphsample.SampleStats{}, err
	}
	into.SetEdges(edges, 0)
	return st, nil
}

// Close closes every engine.
func (m *Multi) Close() error {
	var errs []error
	for _, e := range m.engines {
		errs = append(errs, e.Close())
	}
	return errors.Join(errs...)
}

// LastRunStats implements walk.StatsReporter: walks, steps and memory
// summed over the engines, compute time the slowest engine's.
func (m *Multi) LastRunStats() walk.RunStats {
	m.lastMu.Lock()
	defer m.lastMu.Unlock()
	return m.last
}

// Run implements walk.Engine. An error from one engine, or from emit,
// cancels the others; Run returns once all have stopped, with emit's error
// or else the first engine's.
// Check says whether every device's engine walks a (walk.AlgorithmChecker).
func (m *Multi) Check(a walk.Algorithm) error {
	for _, e := range m.engines {
		if err := walk.CheckAlgorithm(e, a); err != nil {
			return err
		}
	}
	return nil
}

var _ walk.OverlayWalker = (*Multi)(nil)

// HoldsSnapshot implements walk.SnapshotHolder: any device's engine pays
// to change snapshots for a.
func (m *Multi) HoldsSnapshot(a walk.Algorithm) bool {
	for _, e := range m.engines {
		if walk.HoldsSnapshot(e, a) {
			return true
		}
	}
	return false
}

// CheckOverlay implements walk.OverlayWalker: every device's engine walks
// its share of a job on a live graph's snapshot, each with its own copy of
// the delta.
func (m *Multi) CheckOverlay(a walk.Algorithm) error {
	for _, e := range m.engines {
		if err := walk.CheckOverlay(e, a); err != nil {
			return err
		}
	}
	return nil
}

func (m *Multi) Run(ctx context.Context, jobs []walk.Job, emit walk.EmitFunc) error {
	t0 := time.Now()
	shares := splitJobs(jobs, len(m.engines))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu      sync.Mutex // emit is called from one goroutine at a time
		emitErr error
		wg      sync.WaitGroup
	)
	errs := make([]error, len(m.engines))
	for k, e := range m.engines {
		if len(shares[k]) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = e.Run(ctx, shares[k], func(c walk.Chunk) error {
				mu.Lock()
				defer mu.Unlock()
				if emitErr != nil {
					return emitErr
				}
				if err := emit(c); err != nil {
					emitErr = err
					cancel()
					return err
				}
				return nil
			})
			if errs[k] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	m.record(t0)
	if emitErr != nil {
		return emitErr
	}
	for k, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("gpu %d of %d: %w", k, len(m.engines), err)
		}
	}
	return errors.Join(errs...)
}

// record sums the engines' last stats.
func (m *Multi) record(t0 time.Time) {
	st := walk.RunStats{Wall: time.Since(t0)}
	for _, e := range m.engines {
		sr, ok := e.(walk.StatsReporter)
		if !ok {
			continue
		}
		s := sr.LastRunStats()
		st.Walks += s.Walks
		st.Steps += s.Steps
		st.MemoryBytes += s.MemoryBytes
		st.TableBytes += s.TableBytes
		st.Compute = max(st.Compute, s.Compute)
		st.TableBuild = max(st.TableBuild, s.TableBuild)
		st.DeltaBytes += s.DeltaBytes
		st.DeltaUpload = max(st.DeltaUpload, s.DeltaUpload)
	}
	m.lastMu.Lock()
	m.last = st
	m.lastMu.Unlock()
}

// splitJobs cuts jobs' walks, in order, into n shares of nearly equal
// walk counts; a job cut between shares becomes one job per share with the
// same tag and seed and the walk ids it has in the whole job.
func splitJobs(jobs []walk.Job, n int) [][]walk.Job {
	var total int64
	for _, j := range jobs {
		total += int64(len(j.Starts))
	}
	shares := make([][]walk.Job, n)
	k, inShare := 0, int64(0)
	want := func(k int) int64 { return (total*int64(k+1))/int64(n) - (total*int64(k))/int64(n) }
	for _, j := range jobs {
		for lo := 0; lo < len(j.Starts); {
			for k < n-1 && inShare >= want(k) {
				k, inShare = k+1, 0
			}
			take := len(j.Starts) - lo
			if k < n-1 {
				take = int(min(int64(take), want(k)-inShare))
			}
			part := j
			part.Starts = j.Starts[lo : lo+take]
			part.FirstWalk = j.FirstWalk + uint64(lo)
			shares[k] = append(shares[k], part)
			inShare += int64(take)
			lo += take
		}
	}
	return shares
}
