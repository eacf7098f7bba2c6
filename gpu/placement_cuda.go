//go:build cuda

package gpu

import (
	"fmt"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// placed is the engine's state under a placement plan (placement.go): the
// relocated starts on the device and the host halves of the edge arrays in
// pinned, mapped memory.
type placed struct {
	layout *layout
	plan   *Placement
	dPlace cu.DevicePtr
	// Host arrays: device addresses of the mapped memory (the kernels get
	// them biased by -split) and the host pointers to free.
	hTargets, hWeights, hLabels, hAlias cu.DevicePtr
	hSegTargets, hSegAlias              cu.DevicePtr
	segSplit                            uint64
	hostPtrs                            []unsafe.Pointer
	// hubs: a partitioned engine's layout (placeHubs), whose second side
	// is the stripes, not host memory; runs fill its device side.
	hubs bool
	runs [][3]uint64
}

// memFree is the device memory the engine may still allocate: the free
// memory, or what the memory limit leaves after the engine's allocations
// (device thread).
func (e *Engine) memFree() (int64, error) {
	free, _, err := cu.MemInfo()
	if err != nil {
		return 0, fmt.Errorf("gpu: memory info: %w", err)
	}
	if e.cfg.memoryLimit > 0 {
		var used int64
		for _, n := range e.allocs {
			used += n
		}
		used += e.stripeBytes
		free = min(free, e.cfg.memoryLimit-used)
	}
	return free, nil
}

var _ Placer = (*Engine)(nil)

// Placement returns the engine's placement plan, nil when the whole graph
// is on the device.
func (e *Engine) Placement() *Placement {
	if e.placed == nil {
		return nil
	}
	p := *e.placed.plan
	return &p
}

// hostMemory is the host memory a placement may use (hostAvailable).
func (e *Engine) hostMemory() int64 { return hostAvailable() }

// mapped allocates n bytes of mapped host memory for part name.
func (e *Engine) mapped(name string, n int64) (unsafe.Pointer, cu.DevicePtr, error) {
	if e.inject.failAlloc() {
		return nil, 0, fmt.Errorf("gpu: mapped host memory for %s (%d bytes): %w", name, n, e.inject.errOr(cu.OutOfMemory))
	}
	p, d, err := e.hostAllocMapped(n)
	if err != nil {
		return nil, 0, fmt.Errorf("gpu: %s: %w", name, err)
	}
	e.placed.hostPtrs = append(e.placed.hostPtrs, p)
	return p, d, nil
}

func hostSlice[T any](p unsafe.Pointer, n int64) []T {
	if p == nil {
		return nil
	}
	return unsafe.Slice((*T)(p), n)
}

// splitArray allocates one edge array's two sides: devN slots of Go memory
// (uploaded after the fill) and hostN of mapped host memory, whose device
// address goes to *hostDev (device thread).
func splitArray[T any](e *Engine, name string, devN, hostN int64, hostDev *cu.DevicePtr) (dev, host []T, err error) {
	var zero T
	p, d, err := e.mapped(name+".host", hostN*int64(unsafe.Sizeof(zero)))
	if err != nil {
		return nil, nil, err
	}
	*hostDev = d
	return make([]T, devN), hostSlice[T](p, hostN), nil
}

// setupPlaced uploads the graph under a placement plan with deviceBytes of
// device memory for it (device thread).
func (e *Engine) setupPlaced(deviceBytes int64) error {
	t0 := time.Now()
	g := e.g
	s := shapeOf(g)
	maxSlots, err := slotBudget(s, deviceBytes, e.cfg.deviceFraction)
	if err != nil {
		return err
	}
	l := planLayout(g.Offsets, maxSlots)
	plan := placementOf(s, l, false, false)
	if err := checkHostMemory(plan, e.hostMemory()); err != nil {
		return err
	}
	e.placed = &placed{layout: l, plan: plan}
	devN, hostN := int64(l.split)+chunkPad, int64(l.host)+chunkPad
	// Each array the plan places (placedArrays): its device side in Go
	// memory until the upload, its host side mapped.
	var dev, host sideArrays
	pl := e.placed
	if dev.targets, host.targets, err = splitArray[uint32](e, "graph.targets", devN, hostN, &pl.hTargets); err != nil {
		return err
	}
	if s.weighted {
		if dev.weights, host.weights, err = splitArray[float32](e, "graph.weights", devN, hostN, &pl.hWeights); err != nil {
			return err
		}
		if s.edges > 0 {
			if dev.alias, host.alias, err = splitArray[aliasEntry](e, "alias.table", devN, hostN, &pl.hAlias); err != nil {
				return err
			}
		}
	}
	if s.labelled {
		if dev.labels, host.labels, err = splitArray[uint8](e, "graph.labels", devN, hostN, &pl.hLabels); err != nil {
			return err
		}
	}
	fillPlaced(g, l, dev, host)
	// upload allocates nothing for an array the graph lacks. A stream
	// plan held beside this one (setupBoth) uploaded the offsets already.
	if e.dOffsets == 0 {
		if e.dOffsets, err = upload(e, "graph.offsets", g.Offsets); err != nil {
			return err
		}
	}
	if pl.dPlace, err = upload(e, "graph.place", placeRecords(g, l)); err != nil {
		return err
	}
	if e.dTargets, err = upload(e, "graph.targets", dev.targets); err != nil {
		return err
	}
	if e.dWeights, err = upload(e, "graph.weights", dev.weights); err != nil {
		return err
	}
	if e.dLabels, err = upload(e, "graph.labels", dev.labels); err != nil {
		return err
	}
	if e.dAlias, err = upload(e, "alias.table", dev.alias); err != nil {
		return err
	}
	e.graphBytes = plan.Bytes(false)
	e.tableBuild += time.Since(t0)
	e.cfg.logger.Info("gpu placement plan", "plan", plan.String(), "device_share", plan.DeviceShare(),
		"device_bytes", plan.Bytes(false), "host_bytes", plan.Bytes(true), "build", time.Since(t0))
	return nil
}

// labelTablesPlaced builds the MetaPath label tables on the host in the
// plan's layout: the segment offsets on the device, the regrouped targets
// and alias entries split like the edges, or all on the host when the
// device has no room for their device half (device thread).
func (e *Engine) labelTablesPlaced() error {
	t0 := time.Now()
	g, l, s := e.g, e.placed.layout, shapeOf(e.g)
	free, err := e.memFree()
	if err != nil {
		return err
	}
	devN, hostN := int64(l.split)+chunkPad, int64(l.host)+chunkPad
	per := int64(4)
	if s.weighted {
		per += 16
	}
	offBytes := allocBytes((s.vertices*s.labels + 1) * 8)
	if offBytes > free && e.cfg.memoryLimit > 0 {
		// The batch slots took what the limit left: give them back; the
		// next batch sizing makes them smaller.
		for i, sl := range e.slots {
			if sl != nil {
				sl.release(e)
				e.slots[i] = nil
			}
		}
		if free, err = e.memFree(); err != nil {
			return err
		}
	}
	if offBytes > free {
		return &MemoryPlanError{What: "label tables of graph " + s.name, Need: offBytes, Free: free,
			Parts: []MemoryPart{{Name: "labels.offsets", Bytes: offBytes}}}
	}
	onHost := offBytes+devN*per+(64<<20) > free-e.cfg.reserveBytes/2
	plan := placementOf(s, l, true, onHost)
	if err := checkHostMemory(plan, e.hostMemory()); err != nil {
		return err
	}
	segOffsets := make([]uint64, s.vertices*s.labels+1)
	hostSlots := hostN
	if onHost {
		hostSlots += devN
	}
	var dev, host sideArrays
	p, d, err := e.mapped("labels.targets.host", hostSlots*4)
	if err != nil {
		return err
	}
	host.targets, e.placed.hSegTargets = hostSlice[uint32](p, hostSlots), d
	if s.weighted {
		if p, d, err = e.mapped("labels.alias.host", hostSlots*16); err != nil {
			return err
		}
		host.alias, e.placed.hSegAlias = hostSlice[aliasEntry](p, hostSlots), d
	}
	segLayout := *l
	if onHost {
		// Everything on the host: the host side starts at index 0.
		segLayout.split = 0
		dev = sideArrays{}
	} else {
		dev.targets = make([]uint32, devN)
		if s.weighted {
			dev.alias = make([]aliasEntry, devN)
		}
	}
	fillLabelSegments(g, &segLayout, segOffsets, dev, host)
	var segO, segT, segA cu.DevicePtr
	if segO, err = upload(e, "labels.offsets", segOffsets); err != nil {
		return err
	}
	if !onHost {
		if segT, err = upload(e, "labels.targets", dev.targets); err != nil {
			e.free("labels.offsets", &segO)
			return err
		}
		if segA, err = upload(e, "labels.alias", dev.alias); err != nil {
			e.free("labels.offsets", &segO)
			e.free("labels.targets", &segT)
			return err
		}
	}
	e.dSegOffsets, e.dSegTargets, e.dSegAlias = segO, segT, segA
	e.placed.segSplit = segLayout.split
	e.placed.plan = plan
	e.segBuilt = true
	e.tableBuild += time.Since(t0)
	e.cfg.logger.Info("gpu metapath label tables placed", "graph", g.Name, "on_host", onHost, "duration", time.Since(t0))
	return nil
}

// placedParams sets the placement fields of launch parameters: the
// relocated starts and the host arrays biased by -split, so one relocated
// index addresses both sides; without a plan, split says "all on the
// device".
func (e *Engine) placedParams(p *walkParams) {
	pl := e.placed
	if pl == nil {
		p.split, p.segSplit = ^uint64(0), ^uint64(0)
		return
	}
	bias := func(d cu.DevicePtr, size, split uint64) uint64 {
		if d == 0 {
			return 0
		}
		return uint64(d) - split*size
	}
	sp := pl.layout.split
	p.place, p.split, p.segSplit = uint64(pl.dPlace), sp, pl.segSplit
	p.hTargets = bias(pl.hTargets, 4, sp)
	p.hLabels = bias(pl.hLabels, 1, sp)
	if p.weights != 0 {
		p.hWeights = bias(pl.hWeights, 4, sp)
	}
	if p.alias != 0 {
		p.hAlias = bias(pl.hAlias, 16, sp)
	}
	if p.segOffsets != 0 {
		p.hSegTargets = bias(pl.hSegTargets, 4, pl.segSplit)
		if p.weighted != 0 {
			p.hSegAlias = bias(pl.hSegAlias, 16, pl.segSplit)
		}
	}
}

// setupBoth adds the placement plan to an engine that streams (StreamAuto:
// streamchoice.go), in the device memory the stream plan left (less the
// batch slots' reserve; the offsets are shared) and at most the device
// fraction of the edges, as the placement plan would get alone. A
// placement that cannot be made (the host memory or the device left does
// not hold it) leaves the engine streaming alone, as before, with a
// warning (device thread).
func (e *Engine) setupBoth() error {
	t0 := time.Now()
	streamBytes, streamBuild := e.graphBytes, e.tableBuild
	free, err := e.memFree()
	if err != nil {
		return err
	}
	offsets := uploadBytes(int64(len(e.g.Offsets)) * 8)
	if err := e.setupPlaced(free - e.cfg.reserveBytes + offsets); err != nil {
		e.dropPlaced()
		e.graphBytes, e.tableBuild = streamBytes, streamBuild
		e.cfg.logger.Warn("gpu: no placement plan beside the stream plan; every batch is streamed",
			"graph", e.g.Name, "error", err.Error())
		return nil
	}
	placeBytes := e.graphBytes - offsets
	e.graphBytes = streamBytes + placeBytes
	e.cfg.logger.Info("gpu stream and placement plans: each batch walks under the one the cost model says is faster",
		"graph", e.g.Name, "stream_device_bytes", streamBytes, "placement_device_bytes", placeBytes,
		"shared_offsets_bytes", offsets, "placement_host_bytes", e.placed.plan.Bytes(true),
		"stream_host_bytes", e.streamed.plan.HostBytes, "stream_build", streamBuild, "placement_build", time.Since(t0))
	return nil
}

// dropPlaced frees a placement plan that setupBoth could not finish
// (device thread): its device arrays and its host memory.
func (e *Engine) dropPlaced() {
	for name, p := range map[string]*cu.DevicePtr{"graph.targets": &e.dTargets, "graph.weights": &e.dWeights,
		"graph.labels": &e.dLabels, "alias.table": &e.dAlias} {
		e.free(name, p)
	}
	e.releasePlaced()
	e.placed = nil
}

// releasePlaced frees the placement's device and host memory (device thread).
func (e *Engine) releasePlaced() {
	if e.placed == nil {
		return
	}
	e.free("graph.place", &e.placed.dPlace)
	for _, p := range e.placed.hostPtrs {
		e.hostFree(p)
	}
	e.placed.hostPtrs = nil
}
