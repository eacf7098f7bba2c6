package hybrid

import (
	"math"
	"sort"
	"time"

	"github.com/walkstage/walkstage/walk"
)

// space is the walks of the jobs both engines walk, numbered job after
// job: walk i of split job k has index bases[k]+i. Ranges of indices are
// what the engines take from the cursors.
type space struct {
	jobs  []walk.Job // the Run's jobs, as the caller gave them
	split []int      // indices into jobs of the split jobs, in order
	bases []int64    // bases[k]: the index of walk 0 of jobs[split[k]]; bases[len(split)] = total
	base  []int64    // per job of jobs: its base, or -1 when not split
}

func newSpace(jobs []walk.Job, split []int) *space {
	s := &space{jobs: jobs, split: split, bases: make([]int64, len(split)+1), base: make([]int64, len(jobs))}
	for i := range s.base {
		s.base[i] = -1
	}
	var n int64
	for k, j := range split {
		s.bases[k], s.base[j] = n, n
		n += int64(len(jobs[j].Starts))
	}
	s.bases[len(split)] = n
	return s
}

func (s *space) total() int64 { return s.bases[len(s.bases)-1] }

// cut is the walks [lo, hi) as jobs: one per split job the range touches,
// with the walk ids they have in the whole job (walk.Job.FirstWalk), so
// an engine walks exactly the walks the unsplit job has. Tag is the job's
// index in the Run's jobs (the emitter maps it back to the caller's tag).
func (s *space) cut(lo, hi int64) []walk.Job {
	var out []walk.Job
	k := sort.Search(len(s.split), func(k int) bool { return s.bases[k+1] > lo })
	for ; k < len(s.split) && s.bases[k] < hi; k++ {
		j := s.jobs[s.split[k]]
		a, b := max(lo, s.bases[k])-s.bases[k], min(hi, s.bases[k+1])-s.bases[k]
		if a >= b {
			continue
		}
		j.Tag = s.split[k]
		j.Starts = j.Starts[a:b]
		j.FirstWalk += uint64(a)
		out = append(out, j)
	}
	return out
}

// span is a range [lo, hi) of walk indices.
type span struct{ lo, hi int64 }

func (r span) len() int64 { return r.hi - r.lo }

// cursors hand out the walks of the split jobs: the GPU takes ranges from
// the front of what is left, the CPU from the back, each sized by measured
// rate (sizes below). Once nothing is left between them, the CPU takes
// the GPU's range from its back end, walks that the GPU has not emitted
// yet (Garaph's dynamic assignment with the slower engine's tail given to
// the idle one). The GPU engine walks a range in large batches and emits
// a batch only when it ends, so without this a job would wait for the
// GPU's last batch however long the CPU idled; with it, a job ends no
// later than the CPU engine would end it alone (the walks both emit are
// emitted once, the other copy dropped). The caller holds the run's lock.
type cursors struct {
	lo, hi int64 // what neither engine has taken: [lo, hi)
	// The GPU's current range is [gpu.lo, gpu.hi); the CPU has taken
	// [steal, gpu.hi) of it. No range: gpu.lo == gpu.hi.
	gpu   span
	steal int64
}

func newCursors(total int64) *cursors { return &cursors{hi: total} }

// takeGPU gives the GPU the next n walks from the front (fewer when less
// is left), nothing when none is left.
func (c *cursors) takeGPU(n int64) (span, bool) {
	n = min(n, c.hi-c.lo)
	if n <= 0 {
		c.gpu, c.steal = span{}, 0
		return span{}, false
	}
	r := span{c.lo, c.lo + n}
	c.lo += n
	c.gpu, c.steal = r, r.hi
	return r, true
}

// takeGPUWithin is takeGPU with the range's end at most limit (a reorder
// window's end, Engine's WithReorderBytes); nothing when the front of
// what is left is at or past it.
func (c *cursors) takeGPUWithin(n, limit int64) (span, bool) {
	if c.lo >= limit && c.hi > c.lo {
		return span{}, false
	}
	return c.takeGPU(min(n, limit-c.lo))
}

// takeCPUWithin gives the CPU up to n walks from the front of what is
// left, ending at most at limit: under a reorder window the CPU walks next
// to the GPU rather than from the far end, so that no walk is emitted more
// than a window ahead of the first one not emitted yet. When the front is
// at the limit it takes from the back of the GPU's range (stolen, below
// the limit already) only when nothing else is left or steal says the GPU
// has kept the window full too long; otherwise nothing (the caller waits).
func (c *cursors) takeCPUWithin(n, limit int64, steal bool) (r span, stolen, ok bool) {
	if c.hi > c.lo && c.lo < limit {
		r = span{c.lo, min(c.lo+n, c.hi, limit)}
		c.lo = r.hi
		return r, false, true
	}
	if (c.hi == c.lo || steal) && c.steal > c.gpu.lo {
		r = span{max(c.gpu.lo, c.steal-n), c.steal}
		c.steal = r.lo
		return r, true, true
	}
	return span{}, false, false
}

// gpuDone says the GPU ended its range: nothing more to take from it.
func (c *cursors) gpuDone() { c.gpu, c.steal = span{}, 0 }

// takeCPU gives the CPU up to n walks from the back of what is left, or
// else from the back of the GPU's range (stolen: some may be emitted
// already), nothing when neither has any.
func (c *cursors) takeCPU(n int64) (r span, stolen, ok bool) {
	if c.hi > c.lo {
		r = span{max(c.lo, c.hi-n), c.hi}
		c.hi = r.lo
		return r, false, true
	}
	if c.steal > c.gpu.lo {
		r = span{max(c.gpu.lo, c.steal-n), c.steal}
		c.steal = r.lo
		return r, true, true
	}
	return span{}, false, false
}

// Range sizes. The GPU engine pays a fixed cost per Run (launches, the
// pipeline's fill and drain; when it streams a graph larger than the
// device, a sweep over the streamed partitions per step of walk length
// whatever the batch's walker count: docs/benchmarks/out-of-core.md), so
// it takes few, large ranges: its share of what is left by the two
// engines' measured rates, so that both would end together. The CPU
// engine starts its workers per Run in microseconds, so it takes ranges
// of about cpuRangeTime of its own walking: short enough that the GPU,
// when it finishes first, waits on at most that much, long enough that
// a range is thousands of walks.
const (
	cpuRangeTime = 20 * time.Millisecond
	// minRange is the fewest walks a range holds (unless fewer are left).
	minRange = 256
	// unknownCPURanges: without a measured CPU rate, the CPU takes
	// 1/unknownCPURanges of the walks a range.
	unknownCPURanges = 64
	// minGPUShare keeps the GPU taking some walks after a run in which
	// it emitted none (its measured rate 0): the next run measures it
	// again rather than never using the GPU for that algorithm.
	minGPUShare = 1.0 / 64
	// minSplitWalks: a job list with fewer split walks goes to the CPU
	// alone, whose latency for a few thousand walks is below the GPU
	// engine's launch and copy latency.
	minSplitWalks = 2048
)

// gpuShare is the share of the remaining walks the GPU takes, from the
// engines' rates in walks a second (negative: not measured). While either
// is unmeasured the engines are taken as equal: a GPU range too large
// costs only walks walked twice (the CPU takes its tail), one too small
// another GPU range.
func gpuShare(cpuRate, gpuRate float64) float64 {
	if cpuRate < 0 || gpuRate < 0 || cpuRate+gpuRate <= 0 || math.IsNaN(cpuRate+gpuRate) {
		return 0.5
	}
	return max(gpuRate/(cpuRate+gpuRate), minGPUShare)
}

// gpuTake is the walks the GPU takes of left at share.
func gpuTake(left int64, share float64) int64 {
	return max(int64(math.Ceil(float64(left)*share)), minRange)
}

// cpuTake is the walks the CPU takes in one range: cpuRangeTime at its
// rate (walks a second, not above 0: unknown), within [minRange, total/8].
func cpuTake(total int64, cpuRate float64) int64 {
	n := total / unknownCPURanges
	if cpuRate > 0 {
		n = int64(cpuRate * cpuRangeTime.Seconds())
	}
	return min(max(n, minRange), max(total/8, minRange))
}
