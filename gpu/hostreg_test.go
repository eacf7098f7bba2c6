package gpu

import (
	"fmt"
	"testing"
)

// Memory is locked the second call it comes back in (a caller that
// reuses its columns), copied straight into while it keeps coming back,
// unlocked after hostRegKeep calls without it, and never locked when it
// overlaps a locked range it does not lie in; memory seen once is staged.
func TestHostRegsLockWhatComesBack(t *testing.T) {
	const mb = 1 << 20
	type span struct {
		p         uintptr
		n, room   int64
		want      hostUse
		lockFails bool
	}
	cases := []struct {
		name  string
		calls [][]span
		// unlocked[i]: the bases end() returns after call i.
		unlocked map[int][]uintptr
		locked   []uintptr // locked after the last call
	}{
		{
			name: "two sets taking turns",
			calls: [][]span{
				{{1 * mb, 4 * mb, 5 * mb, hostStage, false}, {10 * mb, 4 * mb, 5 * mb, hostStage, false}},
				{{20 * mb, 4 * mb, 5 * mb, hostStage, false}},
				{{1 * mb, 5 * mb, 5 * mb, hostLock, false}, {10 * mb, 3 * mb, 5 * mb, hostLock, false}},
				{{20 * mb, 4 * mb, 5 * mb, hostLock, false}},
				{{1 * mb, 4 * mb, 5 * mb, hostDirect, false}, {10 * mb, 5 * mb, 5 * mb, hostDirect, false}},
				{{20 * mb, 2 * mb, 5 * mb, hostDirect, false}},
			},
			locked: []uintptr{1 * mb, 10 * mb, 20 * mb},
		},
		{
			// walkstage walk's neighbour sampling: three sets, one a
			// call, each back three calls later (with hostRegKeep 2 a
			// set is forgotten before it comes back, never locked).
			name: "three sets, one a call",
			calls: [][]span{
				{{1 * mb, 4 * mb, 5 * mb, hostStage, false}},
				{{10 * mb, 4 * mb, 5 * mb, hostStage, false}},
				{{20 * mb, 4 * mb, 5 * mb, hostStage, false}},
				{{1 * mb, 4 * mb, 5 * mb, hostLock, false}},
				{{10 * mb, 5 * mb, 5 * mb, hostLock, false}},
				{{20 * mb, 3 * mb, 5 * mb, hostLock, false}},
				{{1 * mb, 1 * mb, 5 * mb, hostDirect, false}},
				{{10 * mb, 4 * mb, 5 * mb, hostDirect, false}},
				{{20 * mb, 4 * mb, 5 * mb, hostDirect, false}},
			},
			locked: []uintptr{1 * mb, 10 * mb, 20 * mb},
		},
		{
			name: "fresh memory every call is never locked",
			calls: [][]span{
				{{1 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{6 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{11 * mb, 4 * mb, 4 * mb, hostStage, false}},
			},
		},
		{
			name: "a set that grew is locked again, the old one unlocked once unused",
			calls: [][]span{
				{{1 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{1 * mb, 4 * mb, 4 * mb, hostLock, false}},
				{{100 * mb, 8 * mb, 9 * mb, hostStage, false}},
				{{100 * mb, 8 * mb, 9 * mb, hostLock, false}},
				{{100 * mb, 8 * mb, 9 * mb, hostDirect, false}},
				{{100 * mb, 8 * mb, 9 * mb, hostDirect, false}},
			},
			unlocked: map[int][]uintptr{5: {1 * mb}},
			locked:   []uintptr{100 * mb},
		},
		{
			name: "overlapping a locked range without lying in it",
			calls: [][]span{
				{{1 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{1 * mb, 4 * mb, 4 * mb, hostLock, false}},
				{{3 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{3 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{2 * mb, 1 * mb, 1 * mb, hostDirect, false}},
			},
			locked: []uintptr{1 * mb},
		},
		{
			name: "a lock that failed is staged as new",
			calls: [][]span{
				{{1 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{1 * mb, 4 * mb, 4 * mb, hostLock, true}},
				{{1 * mb, 4 * mb, 4 * mb, hostStage, false}},
				{{1 * mb, 4 * mb, 4 * mb, hostLock, false}},
			},
			locked: []uintptr{1 * mb},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h hostRegs
			for i, call := range c.calls {
				h.begin()
				for _, s := range call {
					if got := h.use(s.p, s.n, s.room); got != s.want {
						t.Errorf("call %d: %d bytes at %d MB: %v, want %v", i, s.n, s.p/mb, got, s.want)
					}
					if s.lockFails {
						h.failed(s.p)
					}
				}
				var bases []uintptr
				for _, r := range h.end() {
					bases = append(bases, r.base)
				}
				if fmt.Sprint(bases) != fmt.Sprint(c.unlocked[i]) {
					t.Errorf("call %d unlocked %v, want %v", i, bases, c.unlocked[i])
				}
			}
			var bases []uintptr
			for _, r := range h.all() {
				bases = append(bases, r.base)
			}
			if fmt.Sprint(bases) != fmt.Sprint(c.locked) {
				t.Errorf("locked at the end: %v, want %v", bases, c.locked)
			}
		})
	}
}
