package ooc

import "math"

// The plan divides the budget before any walk is known: half for walkers,
// a third for three partition slots. A run knows its walks, so it divides
// the two shares again (sizeRun): a walker holds its whole row, and the
// walkers a run does not need, or whose reads cost more than the
// partitions they would displace, are better spent on more slots, since a
// partition the pool keeps is walked without being read again. A walker
// also walks on through every partition the pool holds (advance), so with
// a fraction c of the graph held, a sweep advances it about 1/(1-c) steps
// and reads (1-c) of the graph: bytes read per step fall as (1-c)^2.

// A run's own division gives walkers and slots together runShare of the
// budget less runReserve, and at least runFloor of it. The plan's shares
// (85%) assume partitions sized for every table, which a run rarely loads;
// a division that filled them with the run's own tables left the Go
// runtime too little under a small real limit: with 100 MiB (cgroup v1,
// the runtime's soft limit at 90%, cmd/walkstage) a uniform run whose
// arrays took 85% spent 17 minutes collecting garbage and reclaiming
// pages (8 s under the same budget without the cgroup), and one whose
// arrays took 35% in 19 slots did not finish in 100 s. The arrays live in
// the Go heap, whose collector lets it grow past them before a cycle, and
// the process's code and the page cache need room beside them: about the
// same whatever the budget, so the reserve is a constant. (Mapping the
// arrays outside the heap, advised to huge pages, was slower still under
// the cgroup: 280 s, faulting 2 MiB pages into a cgroup at its limit.)
// Under 400 MiB the full 85% finished as fast in the cgroup as without.
const (
	runShare   = 0.85
	runReserve = 64 << 20
	runFloor   = 0.30
)

// runBytesOf is what a run's division may give walkers and slots under a
// budget of budget bytes.
func runBytesOf(budget int64) int64 {
	return max(int64(float64(budget)*runShare)-runReserve, int64(float64(budget)*runFloor))
}

// runBytes is what partition p takes loaded with the tables n asks for
// (part.load): offsets, targets, the alias probability and target, labels,
// MetaPath's segments (targets, alias entries and per-label offsets).
func (n needs) runBytes(p Partition, numLabels int) int64 {
	nv, ne := int64(p.Vertices()), p.Edges()
	perEdge := int64(4)
	if n.alias {
		perEdge += 8
	}
	b := (nv + 1) * 8
	if n.labelTables {
		perEdge += 1 + 4
		b += nv * 8 * int64(numLabels)
		if n.segAlias {
			perEdge += 4 + 8 // the weights read for the segments' alias entries, and the entries
		}
	}
	return b + ne*perEdge
}

// runSize is how a run divides the walker and pool shares of the budget.
type runSize struct {
	Walkers int // walkers in flight at most
	Slots   int // partitions the pool holds at once
	// SlotBytes is the most one slot takes: the largest partition loaded
	// with the run's tables.
	SlotBytes int64
	// GraphBytes is every partition loaded with the run's tables.
	GraphBytes int64
	// ReadBytes is the model's estimate of what the run reads.
	ReadBytes float64
}

// sizeRun chooses the walkers in flight and the slots for a run of total
// walks of at most steps steps each, whose walker rows take walkerBytes
// each, over the plan's partitions loaded with n's tables: the pair with
// the fewest bytes read by the model above, of those that fit the plan's
// walker and pool shares together with at least minSlots slots. Between
// equal estimates it takes more walkers (more work per visit for the
// workers). Unless choose, it keeps the plan's division: its walker share
// and its slots.
func sizeRun(plan Plan, n needs, numLabels int, total, steps int, walkerBytes int64, minSlots int, choose bool) runSize {
	rs := runSize{}
	for _, p := range plan.Partitions {
		b := n.runBytes(p, numLabels)
		rs.GraphBytes += b
		rs.SlotBytes = max(rs.SlotBytes, b)
	}
	rs.SlotBytes = max(rs.SlotBytes, 1)
	avail := min(plan.PoolBytes+plan.WalkerBytes, runBytesOf(plan.Budget))
	parts := len(plan.Partitions)
	// What the plan itself would do: its walker share, its slots.
	fallback := runSize{Walkers: min(max(int(plan.WalkerBytes/walkerBytes), minWalkers), total), Slots: plan.Slots,
		SlotBytes: rs.SlotBytes, GraphBytes: rs.GraphBytes}
	fallback.ReadBytes = readModel(fallback, parts, total, steps)
	best := fallback
	if total <= 0 || !choose {
		return best
	}
	// Walker counts on a geometric grid from the fewest to all.
	lo := min(minWalkers, total)
	for k := 0; ; k++ {
		w := int(float64(lo) * math.Pow(float64(total)/float64(lo), float64(k)/48))
		if k == 48 {
			w = total
		}
		slots := int((avail - int64(w)*walkerBytes) / rs.SlotBytes)
		if slots >= minSlots {
			c := runSize{Walkers: w, Slots: min(slots, max(parts, minSlots)), SlotBytes: rs.SlotBytes, GraphBytes: rs.GraphBytes}
			c.ReadBytes = readModel(c, parts, total, steps)
			if c.ReadBytes < best.ReadBytes*0.98 || c.ReadBytes <= best.ReadBytes && c.Walkers > best.Walkers {
				best = c
			}
		}
		if k == 48 {
			break
		}
	}
	return best
}

// readModel estimates the bytes a run reads: every partition once, and
// while the pool cannot hold them all, a sweep of the partitions it does
// not keep for about every 1/(1-c) steps of each batch of walkers in
// flight, c the share it keeps (all but one walked and one read ahead).
func readModel(s runSize, parts, total, steps int) float64 {
	g := float64(s.GraphBytes)
	if s.Slots >= parts || s.Walkers <= 0 {
		return g
	}
	c := float64(max(s.Slots-2, 0)) / float64(parts)
	batches := float64(total) / float64(s.Walkers)
	return g + batches*float64(steps)*(1-c)*(1-c)*g
}
