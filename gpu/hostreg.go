package gpu

// Which Go memory the sampled columns' copies page-lock (cuMemHostRegister,
// stagedcopy_cuda.go), apart so that the rule is tested without a device.
//
// Under `walkstage walk` the columns came back through the pinned staging
// buffers and were copied out of them by the cores while the writer's
// encoders held every core: 84-88 ms of a 157-162 ms neighbour sample of
// 59.2 M edges on the H200 host (docs/benchmarks/sampling.md), at 8.5 GB/s
// where the device copies at 40 or more. Callers that sample in waves hand
// the same two column sets over again and again, so the device copies
// straight into them once they are page-locked. Page-locking costs about
// as much as pinning fresh memory (0.5 ms a MB on that host), four times a
// copy out, so memory is locked the second time it comes back, not the
// first: a caller that copies into fresh memory every call (the forest
// fire rounds, the tests) pays nothing more.

// hostRegKeep is how many copy calls a locked range stays locked without
// being copied into, and how long a range seen once is remembered: the
// command's neighbour sampling hands three column sets over in turn (each
// back three calls later), its other samplers two, the stage one per
// request.
const hostRegKeep = 4

// hostRange is a range of Go memory seen by a copy, locked or not.
type hostRange struct {
	base, end uintptr
	used      uint64 // the last call that copied into it
	locked    bool
}

// hostRegs decides, call by call, which destinations a copy locks, copies
// straight into, or stages (device thread).
type hostRegs struct {
	call   uint64
	ranges []hostRange
}

// hostUse is what a copy does with one destination.
type hostUse int

const (
	hostStage  hostUse = iota // through the pinned staging buffers
	hostDirect                // straight into it: it is locked
	hostLock                  // lock [p, p+room) first, then straight into it
)

// begin starts a copy call.
func (h *hostRegs) begin() { h.call++ }

// use says how this call copies n bytes into p, the start of room bytes of
// one Go object that the caller may hand over again. A range seen in an
// earlier call with the same start is locked (with the room it has now);
// one that overlaps a locked range without lying inside it is staged (the
// driver refuses overlapping registrations).
func (h *hostRegs) use(p uintptr, n, room int64) hostUse {
	end := p + uintptr(max(room, n))
	keep := h.ranges[:0]
	act, found := hostStage, false
	for _, r := range h.ranges {
		switch {
		case r.locked && p >= r.base && p+uintptr(n) <= r.end:
			r.used, act, found = h.call, hostDirect, true
		case r.locked && p < r.end && end > r.base:
			found = true // overlaps a locked range: staged
		case !r.locked && r.base == p && !found:
			if r.used < h.call {
				r.end, r.locked, act = end, true, hostLock
			}
			r.used, found = h.call, true
		case !r.locked && p < r.end && end > r.base:
			continue // memory seen before under another start: forgotten
		}
		keep = append(keep, r)
	}
	h.ranges = keep
	if !found {
		h.ranges = append(h.ranges, hostRange{base: p, end: end, used: h.call})
	}
	return act
}

// failed records that locking the range at p failed: it is forgotten, and
// staged as if new next time.
func (h *hostRegs) failed(p uintptr) {
	for i, r := range h.ranges {
		if r.base == p {
			h.ranges = append(h.ranges[:i], h.ranges[i+1:]...)
			return
		}
	}
}

// end ends a copy call and returns the locked ranges not copied into for
// hostRegKeep calls, which the caller unlocks; the ranges seen once that
// long are forgotten.
func (h *hostRegs) end() []hostRange {
	var stale []hostRange
	keep := h.ranges[:0]
	for _, r := range h.ranges {
		if h.call-r.used >= hostRegKeep {
			if r.locked {
				stale = append(stale, r)
			}
			continue
		}
		keep = append(keep, r)
	}
	h.ranges = keep
	return stale
}

// all forgets every range and returns the locked ones (Close).
func (h *hostRegs) all() []hostRange {
	var locked []hostRange
	for _, r := range h.ranges {
		if r.locked {
			locked = append(locked, r)
		}
	}
	h.ranges = nil
	return locked
}
