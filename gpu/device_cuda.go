//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>

// cu v0.9.6 has no page-locked host allocation; copies from pageable memory
// are staged and not truly asynchronous, so the engine allocates its host
// buffers here.
static CUresult ws_host_alloc(void **p, size_t n) { return cuMemHostAlloc(p, n, 0); }
static CUresult ws_host_free(void *p) { return cuMemFreeHost(p); }
// Mapped host memory for a placement plan: kernels read it in place over
// PCIe. PORTABLE: any context may map it; with unified addressing its
// device pointer is the host pointer, which ws_host_device_ptr checks.
static CUresult ws_host_alloc_mapped(void **p, size_t n) {
  return cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
}
static CUresult ws_host_device_ptr(CUdeviceptr *d, void *p) { return cuMemHostGetDevicePointer(d, p, 0); }
static void ws_module_unload(CUmodule m) { cuModuleUnload(m); }
// Go memory page-locked for the sampled columns' copies (hostreg.go).
static CUresult ws_host_register(void *p, size_t n) { return cuMemHostRegister(p, n, 0); }
// Anonymous memory page-locked as the engine's large pinned buffers
// (pinned_cuda.go), mapped into the device's address space when asked.
static CUresult ws_host_register_mapped(void *p, size_t n) {
  return cuMemHostRegister(p, n, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
}
static CUresult ws_host_unregister(void *p) { return cuMemHostUnregister(p); }
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"
)

// device owns one CUDA context. CUDA binds a context to an OS thread, so
// every driver call runs on one goroutine locked to its thread; callers hand
// it closures through do.
type device struct {
	dev   cu.Device
	ctx   cu.CUContext
	calls chan func()
	quit  chan struct{}
}

func openDevice(ordinal int) (*device, error) {
	d := &device{calls: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go d.loop(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return d, nil
}

func (d *device) loop(ordinal int, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := func() error {
		n, err := cu.NumDevices()
		if err != nil {
			return fmt.Errorf("%w: count devices: %v", ErrUnavailable, err)
		}
		if ordinal < 0 || ordinal >= n {
			return fmt.Errorf("%w: device %d requested, %d present", ErrUnavailable, ordinal, n)
		}
		if d.dev, err = cu.GetDevice(ordinal); err != nil {
			return fmt.Errorf("%w: device %d: %v", ErrUnavailable, ordinal, err)
		}
		if d.ctx, err = d.dev.RetainPrimaryCtx(); err != nil {
			return fmt.Errorf("%w: context on device %d: %v", ErrUnavailable, ordinal, err)
		}
		if err = cu.SetCurrentContext(d.ctx); err != nil {
			_ = d.dev.ReleasePrimaryCtx()
			return fmt.Errorf("%w: bind context: %v", ErrUnavailable, err)
		}
		return nil
	}()
	ready <- err
	if err != nil {
		return
	}
	for {
		select {
		case f := <-d.calls:
			f()
		case <-d.quit:
			_ = cu.Synchronize()
			_ = d.dev.ReleasePrimaryCtx()
			return
		}
	}
}

// do runs f on the context's thread and returns its error.
func (d *device) do(f func() error) error {
	ch := make(chan error, 1)
	d.calls <- func() { ch <- f() }
	return <-ch
}

func (d *device) close() { close(d.quit) }

// hostAlloc returns n bytes of page-locked host memory (call on the device
// thread).
func hostAlloc(n int64) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.ws_host_alloc(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemHostAlloc %d bytes: CUresult %d", n, int(r))
	}
	return p, nil
}

// hostAllocMapped returns n bytes of page-locked host memory mapped into
// the device's address space, and its device address (device thread).
func hostAllocMapped(n int64) (unsafe.Pointer, cu.DevicePtr, error) {
	var p unsafe.Pointer
	if r := C.ws_host_alloc_mapped(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return nil, 0, fmt.Errorf("cuMemHostAlloc (mapped) %d bytes: CUresult %d", n, int(r))
	}
	var d C.CUdeviceptr
	if r := C.ws_host_device_ptr(&d, p); r != C.CUDA_SUCCESS {
		C.ws_host_free(p)
		return nil, 0, fmt.Errorf("cuMemHostGetDevicePointer: CUresult %d", int(r))
	}
	return p, cu.DevicePtr(d), nil
}

func hostFree(p unsafe.Pointer) {
	if p != nil {
		C.ws_host_free(p)
	}
}

// hostRegister page-locks n bytes of Go memory at p, which runtime.Pinner
// holds in place until hostUnregister (device thread).
func hostRegister(p unsafe.Pointer, n int64) error {
	if r := C.ws_host_register(p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return fmt.Errorf("cuMemHostRegister %d bytes: CUresult %d", n, int(r))
	}
	return nil
}

func hostUnregister(p unsafe.Pointer) { C.ws_host_unregister(p) }

// hostRegisterMapped page-locks n bytes at p and maps them into the
// device's address space, returning their device address (device thread).
func hostRegisterMapped(p unsafe.Pointer, n int64) (cu.DevicePtr, error) {
	if r := C.ws_host_register_mapped(p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return 0, fmt.Errorf("cuMemHostRegister (mapped) %d bytes: CUresult %d", n, int(r))
	}
	var d C.CUdeviceptr
	if r := C.ws_host_device_ptr(&d, p); r != C.CUDA_SUCCESS {
		C.ws_host_unregister(p)
		return 0, fmt.Errorf("cuMemHostGetDevicePointer: CUresult %d", int(r))
	}
	return cu.DevicePtr(d), nil
}

// unloadModule unloads m; cu v0.9.6 only offers this through its Ctx type.
func unloadModule(m cu.Module) {
	C.ws_module_unload(*(*C.CUmodule)(unsafe.Pointer(&m)))
}
