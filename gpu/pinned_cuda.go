//go:build cuda

package gpu

import (
	"runtime"
	"sync"
	"syscall"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/walkstage/walkstage/internal/hugemem"
)

// Large pinned host buffers (the stream plan's entries, the placement
// plan's mapped share, the batch slots' rows) are anonymous memory
// (hugemem.Map), advised huge pages, faulted in on every core and then page-locked with
// cuMemHostRegister, rather than cuMemHostAlloc'd: on the H200 host
// cuMemHostAlloc took 1.6 s for 2 GiB (1.0-1.2 s mapped) and its free
// 0.3 s, where the mapping, the parallel faults and the registration took
// 0.22 s and the unregistration 0.05 s, with copies from it at the same 54
// GB/s (docs/benchmarks/out-of-core.md). A one-shot command pays that once
// per buffer, so it is most of a streamed command's set-up. Small buffers
// stay cuMemHostAlloc'd: a mapping rounds up to a huge page.

// registerMin is the least size registered rather than cuMemHostAlloc'd.
const registerMin = 8 << 20

// pinnedRegions are the engine's registered buffers by start, each with
// the function that unregisters and unmaps it.
type pinnedRegions struct {
	mu   sync.Mutex
	free map[unsafe.Pointer]func()
}

// alloc returns n bytes of registered host memory and, when mapped, its
// device address; ok false when the mapping or the registration failed
// (the caller then takes cuMemHostAlloc's). Device thread.
func (r *pinnedRegions) alloc(n int64, mapped bool) (p unsafe.Pointer, d cu.DevicePtr, ok bool) {
	p, unmap := hugemem.Map(uintptr(n))
	if p == nil {
		return nil, 0, false
	}
	a := unsafe.Slice((*byte)(p), n)
	// Not inherited by a forked child: a copy-on-write page would leave
	// the device's transfers on the page the child kept.
	_ = syscall.Madvise(a, syscall.MADV_DONTFORK)
	faultIn(a)
	var err error
	if mapped {
		d, err = hostRegisterMapped(p, n)
	} else {
		err = hostRegister(p, n)
	}
	if err != nil {
		unmap()
		return nil, 0, false
	}
	r.mu.Lock()
	if r.free == nil {
		r.free = map[unsafe.Pointer]func(){}
	}
	r.free[p] = func() {
		hostUnregister(p)
		unmap()
	}
	r.mu.Unlock()
	return p, d, true
}

// release frees p when it is one of the regions; false when it is not.
func (r *pinnedRegions) release(p unsafe.Pointer) bool {
	r.mu.Lock()
	f, ok := r.free[p]
	delete(r.free, p)
	r.mu.Unlock()
	if ok {
		f()
	}
	return ok
}

// faultIn writes every page of a on all cores, so that the registration
// finds them present: the driver would otherwise fault them in one thread.
func faultIn(a []byte) {
	const page = 4 << 10
	w := min(runtime.NumCPU(), max(len(a)/(64<<20), 1))
	per := (len(a)/w + page - 1) / page * page
	var wg sync.WaitGroup
	for lo := 0; lo < len(a); lo += per {
		wg.Add(1)
		go func(b []byte) {
			defer wg.Done()
			for i := 0; i < len(b); i += page {
				b[i] = 0
			}
		}(a[lo:min(lo+per, len(a))])
	}
	wg.Wait()
}
