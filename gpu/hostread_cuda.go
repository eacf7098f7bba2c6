//go:build cuda

package gpu

import (
	"fmt"
	"time"

	"gorgonia.org/cu"
)

var _ HostReadBencher = (*Engine)(nil)

// HostReadBench runs host_read_bench over regions of mapped host memory of
// each size, and over device memory of the largest, and times a
// sequential copy of the largest region from pinned memory to the device. It allocates and frees its own memory.
func (e *Engine) HostReadBench(regionBytes ...int64) (HostReadReport, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var rep HostReadReport
	err := e.dev.do(func() error {
		fn, err := e.mod.Function("host_read_bench")
		if err != nil {
			return fmt.Errorf("gpu: kernel host_read_bench: %w", err)
		}
		occ, err := fn.MaxActiveBlocksPerMultiProcessor(threadBlock, 0)
		if err != nil {
			return fmt.Errorf("gpu: occupancy of host_read_bench: %w", err)
		}
		sink, err := cu.MemAlloc(8)
		if err != nil {
			return fmt.Errorf("gpu: host read bench: %w", err)
		}
		defer func() { _ = cu.MemFree(sink) }()
		grid := e.numSM * max(occ, 1)
		threads := int64(grid * threadBlock)
		measure := func(memory string, base cu.DevicePtr, region int64, reads uint64) error {
			for _, size := range []int{32, 64} {
				args := []uint64{uint64(base), uint64(region / int64(size)), uint64(size / 16), reads, uint64(sink)}
				for i := range 2 { // a warm-up launch, then the timed one
					t := time.Now()
					if err := launch(fn, grid, threadBlock, cu.Stream{}, args); err != nil {
						return fmt.Errorf("gpu: host_read_bench: %w", err)
					}
					if err := cu.Synchronize(); err != nil {
						return fmt.Errorf("gpu: host_read_bench: %w", err)
					}
					if i == 1 {
						rep.Rows = append(rep.Rows, HostReadRow{Memory: memory, RegionBytes: region, ReadBytes: size,
							ReadsPerSec: float64(threads) * float64(reads) / time.Since(t).Seconds()})
					}
				}
			}
			return nil
		}
		for _, region := range regionBytes {
			host, hostDev, err := hostAllocMapped(region)
			if err != nil {
				return fmt.Errorf("gpu: %w", err)
			}
			err = measure("pinned", hostDev, region, 64)
			hostFree(host)
			if err != nil {
				return err
			}
		}
		region := regionBytes[len(regionBytes)-1]
		if err := e.copyBench(region, &rep); err != nil {
			return err
		}
		dev, err := cu.MemAlloc(region)
		if err != nil {
			return fmt.Errorf("gpu: host read bench: device region: %w", err)
		}
		defer func() { _ = cu.MemFree(dev) }()
		if err := cu.MemsetD8(dev, 1, region); err != nil {
			return fmt.Errorf("gpu: host read bench: %w", err)
		}
		return measure("device", dev, region, 2048)
	})
	return rep, err
}

// copyBench times sequential host-to-device copies of region bytes from
// pinned memory (device thread).
func (e *Engine) copyBench(region int64, rep *HostReadReport) error {
	host, err := hostAlloc(region)
	if err != nil {
		return fmt.Errorf("gpu: host read bench: %w", err)
	}
	defer hostFree(host)
	dev, err := cu.MemAlloc(region)
	if err != nil {
		return fmt.Errorf("gpu: host read bench: copy target: %w", err)
	}
	defer func() { _ = cu.MemFree(dev) }()
	const copies = 3
	t0 := time.Now()
	for range copies {
		if err := cu.MemcpyHtoD(dev, host, region); err != nil {
			return fmt.Errorf("gpu: host read bench: copy: %w", err)
		}
	}
	rep.CopyGBps = float64(copies*region) / time.Since(t0).Seconds() / 1e9
	return nil
}
