//go:build cuda

package gpu

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// alloc allocates device memory and records it under name (device
// thread).
func (e *Engine) alloc(name string, n int64) (cu.DevicePtr, error) {
	n = allocBytes(n)
	var p cu.DevicePtr
	var err error
	if e.inject.failAlloc() {
		err = e.inject.errOr(cu.OutOfMemory)
	} else {
		p, err = cu.MemAlloc(n)
	}
	if err != nil {
		return 0, fmt.Errorf("gpu: allocate %s (%d bytes): %w", name, n, err)
	}
	e.liveDev++
	e.allocs[name] = n
	e.cfg.logger.Debug("gpu device allocation", "name", name, "bytes", n)
	return p, nil
}

// free releases *p, if allocated, and zeroes it (device thread).
func (e *Engine) free(name string, p *cu.DevicePtr) {
	if *p != 0 {
		_ = cu.MemFree(*p)
		*p = 0
		e.liveDev--
	}
	delete(e.allocs, name)
}

// hostAlloc returns n bytes (at least 8) of pinned host memory (device
// thread).
func (e *Engine) hostAlloc(n int64) (unsafe.Pointer, error) {
	if e.inject.failAlloc() {
		return nil, fmt.Errorf("gpu: pinned host memory (%d bytes): %w", n, e.inject.errOr(cu.OutOfMemory))
	}
	if n >= registerMin {
		if p, _, ok := e.pinned.alloc(n, false); ok {
			e.liveHost++
			return p, nil
		}
	}
	p, err := hostAlloc(max(n, 8))
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	e.liveHost++
	return p, nil
}

// hostAllocMapped returns n bytes (at least 8) of pinned host memory mapped
// into the device's address space, and its device address (device
// thread). Not failure-injected: its callers check inject themselves.
func (e *Engine) hostAllocMapped(n int64) (unsafe.Pointer, cu.DevicePtr, error) {
	if n >= registerMin {
		if p, d, ok := e.pinned.alloc(n, true); ok {
			e.liveHost++
			return p, d, nil
		}
	}
	p, d, err := hostAllocMapped(max(n, 8))
	if err != nil {
		return nil, 0, err
	}
	e.liveHost++
	return p, d, nil
}

func (e *Engine) hostFree(p unsafe.Pointer) {
	if p != nil {
		if !e.pinned.release(p) {
			hostFree(p)
		}
		e.liveHost--
	}
}

// The engine's memory copies, each checked (and counted by inject).
func (e *Engine) copyHtoD(dst cu.DevicePtr, src unsafe.Pointer, n int64) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyHtoD(dst, src, n)
}

func (e *Engine) copyDtoH(dst unsafe.Pointer, src cu.DevicePtr, n int64) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyDtoH(dst, src, n)
}

func (e *Engine) copyHtoDAsync(dst cu.DevicePtr, src unsafe.Pointer, n int64, s cu.Stream) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyHtoDAsync(dst, src, n, s)
}

func (e *Engine) copyDtoHAsync(dst unsafe.Pointer, src cu.DevicePtr, n int64, s cu.Stream) error {
	if e.inject.failCopy() {
		return e.inject.errOr(cu.InvalidValue)
	}
	return cu.MemcpyDtoHAsync(dst, src, n, s)
}

func upload[T any](e *Engine, name string, s []T) (cu.DevicePtr, error) {
	if len(s) == 0 {
		return 0, nil
	}
	n := int64(len(s)) * int64(unsafe.Sizeof(s[0]))
	// Pad to 64 bytes (zeroed): the reservoir samplers read edges in
	// aligned 16-byte chunks that may run past the last edge.
	padded := (n + 63) &^ 63
	p, err := e.alloc(name, padded)
	if err != nil {
		return 0, err
	}
	if err := cu.MemsetD8(p, 0, padded); err != nil {
		e.free(name, &p)
		return 0, fmt.Errorf("gpu: clear %s: %w", name, err)
	}
	if err := e.copyHtoD(p, unsafe.Pointer(&s[0]), n); err != nil {
		e.free(name, &p)
		return 0, fmt.Errorf("gpu: upload %s: %w", name, err)
	}
	return p, nil
}
