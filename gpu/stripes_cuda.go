//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <string.h>

// CUDA virtual memory management, which cu v0.9.6 does not wrap: physical
// pieces on chosen devices mapped side by side into one reserved range.
//
// dev -1 is host memory on NUMA node 0: CU_MEM_LOCATION_TYPE_HOST_NUMA,
// which drivers of CUDA 12.2 and later take; the 11.8 headers CI builds
// with lack its name, so its value is spelt out.
#define WS_MEM_LOCATION_TYPE_HOST_NUMA ((CUmemLocationType)3)
static void ws_vmm_prop(CUmemAllocationProp *p, int dev) {
  memset(p, 0, sizeof *p);
  p->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  if (dev < 0) {
    p->location.type = WS_MEM_LOCATION_TYPE_HOST_NUMA;
    p->location.id = 0;
  } else {
    p->location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->location.id = dev;
  }
}
static CUresult ws_vmm_granularity(size_t *g, int dev) {
  CUmemAllocationProp p;
  ws_vmm_prop(&p, dev);
  return cuMemGetAllocationGranularity(g, &p, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
}
static CUresult ws_vmm_reserve(CUdeviceptr *va, size_t n, size_t align) { return cuMemAddressReserve(va, n, align, 0, 0); }
static CUresult ws_vmm_create(CUmemGenericAllocationHandle *h, size_t n, int dev) {
  CUmemAllocationProp p;
  ws_vmm_prop(&p, dev);
  return cuMemCreate(h, n, &p, 0);
}
static CUresult ws_vmm_map(CUdeviceptr va, size_t n, CUmemGenericAllocationHandle h) { return cuMemMap(va, n, 0, h, 0); }
static CUresult ws_vmm_access(CUdeviceptr va, size_t n, const int *devs, int k) {
  CUmemAccessDesc d[64];
  if (k > 64) return CUDA_ERROR_INVALID_VALUE;
  for (int i = 0; i < k; i++) {
    memset(&d[i], 0, sizeof d[i]);
    d[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    d[i].location.id = devs[i];
    d[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  }
  return cuMemSetAccess(va, n, d, k);
}
static CUresult ws_vmm_unmap(CUdeviceptr va, size_t n) { return cuMemUnmap(va, n); }
static CUresult ws_vmm_release(CUmemGenericAllocationHandle h) { return cuMemRelease(h); }
static CUresult ws_vmm_address_free(CUdeviceptr va, size_t n) { return cuMemAddressFree(va, n); }
static CUresult ws_vmm_supported(int *ok, int ordinal) {
  CUdevice d;
  CUresult r = cuDeviceGet(&d, ordinal);
  if (r != CUDA_SUCCESS) return r;
  return cuDeviceGetAttribute(ok, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d);
}
static CUresult ws_can_access_peer(int *ok, int ordinal, int peer) {
  CUdevice d, p;
  CUresult r = cuDeviceGet(&d, ordinal);
  if (r != CUDA_SUCCESS) return r;
  if ((r = cuDeviceGet(&p, peer)) != CUDA_SUCCESS) return r;
  return cuDeviceCanAccessPeer(ok, d, p);
}
*/
import "C"

import (
	"fmt"
	"slices"
	"time"
	"unsafe"

	"gorgonia.org/cu"
)

// distinct is s's devices, each once, in first-named order.
func (s *Stripes) distinct() []int {
	var out []int
	seen := map[int]bool{}
	for _, d := range s.devices {
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// check makes sure every device supports virtual memory management and
// reads every other one's memory (peer access), and returns the mapping
// granularity: the largest recommended one over the devices.
func (s *Stripes) check() (int64, error) {
	ds := s.distinct()
	var gran int64 = 2 << 20
	for _, d := range ds {
		var ok C.int
		if r := C.ws_vmm_supported(&ok, C.int(d)); r != C.CUDA_SUCCESS || ok == 0 {
			return 0, fmt.Errorf("gpu: device %d does not support virtual memory management (CUresult %d), which a partitioned graph needs", d, int(r))
		}
		var g C.size_t
		if r := C.ws_vmm_granularity(&g, C.int(d)); r != C.CUDA_SUCCESS {
			return 0, fmt.Errorf("gpu: mapping granularity of device %d: CUresult %d", d, int(r))
		}
		gran = max(gran, int64(g))
		if s.hostShare > 0 {
			if r := C.ws_vmm_granularity(&g, C.int(hostPiece)); r != C.CUDA_SUCCESS {
				return 0, fmt.Errorf("gpu: the driver maps no host memory into a partitioned graph (CUresult %d; CUDA 12.2 or later needed for a host share)", int(r))
			}
			gran = max(gran, int64(g))
		}
		for _, p := range ds {
			if p == d {
				continue
			}
			if r := C.ws_can_access_peer(&ok, C.int(d), C.int(p)); r != C.CUDA_SUCCESS || ok == 0 {
				return 0, fmt.Errorf("gpu: device %d cannot read device %d's memory (no peer access, CUresult %d): a partitioned graph needs NVLink or PCIe peer access between its devices", d, p, int(r))
			}
		}
	}
	return gran, nil
}

// alloc reserves n bytes (zeroed) for array name, cut over the devices
// (caller holds s.mu; a context current on the calling thread).
func (s *Stripes) alloc(name string, n int64) (cu.DevicePtr, error) {
	if _, ok := s.arrays[name]; ok {
		return 0, fmt.Errorf("gpu: stripes: %s allocated twice", name)
	}
	gran, err := s.check()
	if err != nil {
		return 0, err
	}
	a := &stripedArray{name: name, used: n, size: roundUp(max(n, 1), gran)}
	var va C.CUdeviceptr
	if r := C.ws_vmm_reserve(&va, C.size_t(a.size), C.size_t(gran)); r != C.CUDA_SUCCESS {
		return 0, fmt.Errorf("gpu: reserve %d bytes of address space for %s: CUresult %d", a.size, name, int(r))
	}
	a.va = uint64(va)
	var off int64
	for i, c := range stripeCuts(a.size, gran, len(s.devices), s.hostShare) {
		if c == 0 {
			continue
		}
		dev, where := hostPiece, "in host memory"
		if i < len(s.devices) {
			dev, where = s.devices[i], fmt.Sprintf("on device %d", s.devices[i])
		}
		var h C.CUmemGenericAllocationHandle
		if r := C.ws_vmm_create(&h, C.size_t(c), C.int(dev)); r != C.CUDA_SUCCESS {
			a.release()
			return 0, fmt.Errorf("gpu: allocate %d bytes of %s %s: CUresult %d", c, name, where, int(r))
		}
		if r := C.ws_vmm_map(va+C.CUdeviceptr(off), C.size_t(c), h); r != C.CUDA_SUCCESS {
			C.ws_vmm_release(h)
			a.release()
			return 0, fmt.Errorf("gpu: map %s's piece %s: CUresult %d", name, where, int(r))
		}
		a.pieces = append(a.pieces, stripePiece{device: dev, off: off, size: c, handle: uint64(h)})
		off += c
	}
	ds := s.distinct()
	cds := make([]C.int, len(ds))
	for i, d := range ds {
		cds[i] = C.int(d)
	}
	if r := C.ws_vmm_access(va, C.size_t(a.size), &cds[0], C.int(len(cds))); r != C.CUDA_SUCCESS {
		a.release()
		return 0, fmt.Errorf("gpu: grant devices %v access to %s: CUresult %d", ds, name, int(r))
	}
	p := cu.DevicePtr(a.va)
	if err := cu.MemsetD8(p, 0, a.size); err != nil {
		a.release()
		return 0, fmt.Errorf("gpu: clear %s: %w", name, err)
	}
	s.arrays[name] = a
	return p, nil
}

// release unmaps and frees a's pieces and its range.
func (a *stripedArray) release() error {
	var first error
	note := func(what string, r C.CUresult) {
		if r != C.CUDA_SUCCESS && first == nil {
			first = fmt.Errorf("gpu: %s %s: CUresult %d", what, a.name, int(r))
		}
	}
	for _, p := range a.pieces {
		note("unmap", C.ws_vmm_unmap(C.CUdeviceptr(a.va+uint64(p.off)), C.size_t(p.size)))
		note("release", C.ws_vmm_release(C.CUmemGenericAllocationHandle(p.handle)))
	}
	a.pieces = nil
	if a.va != 0 {
		note("free the address range of", C.ws_vmm_address_free(C.CUdeviceptr(a.va), C.size_t(a.size)))
		a.va = 0
	}
	return first
}

// free releases array name, if allocated, and zeroes *p (caller holds s.mu).
func (s *Stripes) free(name string, p *cu.DevicePtr) {
	if a, ok := s.arrays[name]; ok {
		if err := a.release(); err != nil && s.closeErr == nil {
			s.closeErr = err
		}
		delete(s.arrays, name)
	}
	*p = 0
}

// ptr is array name's address, 0 when the stripes lack it (caller holds
// s.mu).
func (s *Stripes) ptr(name string) cu.DevicePtr {
	if a, ok := s.arrays[name]; ok {
		return cu.DevicePtr(a.va)
	}
	return 0
}

// tableAlloc allocates one of the graph's arrays or tables, or their build
// scratch: in the stripes for a partitioned engine (s.mu held), else on the
// engine's device.
func (e *Engine) tableAlloc(name string, n int64) (cu.DevicePtr, error) {
	if s := e.cfg.stripes; s != nil {
		return s.alloc(name, n)
	}
	return e.alloc(name, n)
}

// tableFree frees what tableAlloc allocated.
func (e *Engine) tableFree(name string, p *cu.DevicePtr) {
	if s := e.cfg.stripes; s != nil {
		s.free(name, p)
		return
	}
	e.free(name, p)
}

// setupStriped sets a partitioned engine up (device thread): its own
// offsets, and the group's edge arrays and alias table, uploaded and built
// by the first engine of the group.
func (e *Engine) setupStriped() (err error) {
	t0 := time.Now()
	g, s := e.g, e.cfg.stripes
	if !slices.Contains(s.devices, e.cfg.device) {
		return fmt.Errorf("gpu: device %d is not one of the partitioned graph's devices %v", e.cfg.device, s.devices)
	}
	if e.dOffsets, err = upload(e, "graph.offsets", g.Offsets); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refs++
	e.striped = true
	built := !s.graphBuilt
	if !s.graphBuilt {
		if err := e.buildStripes(); err != nil {
			return err
		}
		s.graphBuilt = true
	}
	e.dTargets, e.dWeights, e.dLabels, e.dAlias = s.ptr("graph.targets"), s.ptr("graph.weights"), s.ptr("graph.labels"), s.ptr("alias.table")
	e.graphBytes = uploadBytes(int64(len(g.Offsets)) * 8)
	for _, a := range s.arrays {
		for _, p := range a.pieces {
			if p.device == e.cfg.device {
				e.graphBytes += p.size
			}
		}
	}
	if built {
		e.tableBuild += time.Since(t0)
		e.cfg.logger.Info("gpu graph partitioned", "stripes", s.stringLocked(), "build", time.Since(t0))
	}
	e.stripeBytes = e.graphBytes - uploadBytes(int64(len(g.Offsets))*8)
	return e.placeHubs(s.refs - 1)
}

// minHubSlots is the smallest hub copy worth a placement: below it the
// engine reads the stripes alone.
const minHubSlots = 1 << 16

// placeHubs gives a partitioned engine a copy, in its own memory, of the
// highest-degree vertices that are not in its own piece, as many as its
// free memory (less the reserve for batches, capped by the device
// fraction) holds: a walk is at a vertex in proportion to its degree, so
// each hub copied moves a large share of the steps from NVLink reads to
// local ones. The hubs are packed on the device side of a placement layout
// whose second side is the stripes themselves (planHubLayout); the placed
// kernels read either by one relocated index, and the walks stay the same
// since each relocated start keeps its residue modulo 4. join is the
// engine's order of arrival in the group: with several pieces on one
// device (the simulated run) it picks the engine's own (s.mu held; device
// thread).
func (e *Engine) placeHubs(join int) error {
	g, s := e.g, e.cfg.stripes
	sh := shapeOf(g)
	ref, size := "graph.targets", int64(4)
	if g.Weighted() && g.NumEdges() > 0 {
		ref, size = "alias.table", 16 // the weighted walks read their alias entries
	}
	arr := s.arrays[ref]
	if arr == nil {
		return nil
	}
	mine := s.ownPieces(arr, e.cfg.device, join)
	local := func(v int) bool {
		b := int64(g.Offsets[v]) * size
		for _, p := range mine {
			if b >= p.off && b < p.off+p.size {
				return true
			}
		}
		return false
	}
	var localEdges int64
	for v := range g.NumVertices() {
		if local(v) {
			localEdges += int64(g.Offsets[v+1] - g.Offsets[v])
		}
	}
	free, err := e.memFree()
	if err != nil {
		return err
	}
	per := edgeBytes(sh)
	if sh.labelled && sh.labels > 0 {
		per += 4 // room for the hubs' MetaPath label segments
		if sh.weighted {
			per += 16
		}
	}
	slots := (free-e.cfg.reserveBytes-uploadBytes(sh.vertices*placeRecordBytes))/per - chunkPad - 64
	if e.cfg.deviceFraction < 1 {
		slots = min(slots, int64(e.cfg.deviceFraction*float64(sh.edges))-localEdges)
	}
	if slots < minHubSlots {
		e.cfg.logger.Info("gpu partitioned engine: no room for hub copies", "device", e.cfg.device, "local_edges", localEdges, "free_bytes", free)
		return nil
	}
	t0 := time.Now()
	l := planHubLayout(g.Offsets, slots, func(v int) bool { return !local(v) })
	if l.hot == 0 {
		return nil
	}
	pl := &placed{layout: l, hubs: true, runs: hubRuns(g.Offsets, l),
		hTargets: e.dTargets, hWeights: e.dWeights, hLabels: e.dLabels, hAlias: e.dAlias}
	pl.plan = &Placement{Graph: sh.name, Vertices: sh.vertices, Edges: sh.edges, EdgeBytes: edgeBytes(sh),
		DeviceVertices: l.hot, DeviceEdges: l.deviceEdges + localEdges, DeviceSlots: int64(l.split)}
	e.placed = pl
	// From here on e.d* are the engine's own hub copies (Close frees them).
	e.dTargets, e.dWeights, e.dLabels, e.dAlias = 0, 0, 0, 0
	var dst cu.DevicePtr
	for _, a := range []struct {
		name string
		src  cu.DevicePtr
		size int64
		out  *cu.DevicePtr
	}{{"graph.targets", pl.hTargets, 4, &e.dTargets}, {"graph.weights", pl.hWeights, 4, &e.dWeights},
		{"graph.labels", pl.hLabels, 1, &e.dLabels}, {"alias.table", pl.hAlias, 16, &e.dAlias}} {
		if a.src == 0 {
			continue
		}
		if dst, err = e.hubCopy(a.name, a.src, a.size); err != nil {
			return err
		}
		*a.out = dst
		pl.plan.Parts = append(pl.plan.Parts, PlacedPart{Name: a.name + ".hubs", Bytes: (int64(l.split) + chunkPad) * a.size})
	}
	if pl.dPlace, err = upload(e, "graph.place", placeRecords(g, l)); err != nil {
		return err
	}
	e.cfg.logger.Info("gpu partitioned engine: hubs copied to the device", "device", e.cfg.device,
		"hub_vertices", l.hot, "hub_edges", l.deviceEdges, "local_edges", localEdges, "edges", sh.edges,
		"local_share", pl.plan.DeviceShare(), "copies", len(pl.runs), "duration", time.Since(t0))
	return nil
}

// ownPieces are the pieces of a on device: all of them, or with several
// there (the simulated run) the one of the engine's arrival order.
func (s *Stripes) ownPieces(a *stripedArray, device, join int) []stripePiece {
	var on []stripePiece
	for _, p := range a.pieces {
		if p.device == device {
			on = append(on, p)
		}
	}
	if len(on) <= 1 {
		return on
	}
	return on[join%len(on) : join%len(on)+1]
}

// hubCopy copies the hubs' runs of the striped array src (elements of
// size bytes) into a new device array of the layout's device side.
func (e *Engine) hubCopy(name string, src cu.DevicePtr, size int64) (cu.DevicePtr, error) {
	pl := e.placed
	n := (int64(pl.layout.split) + chunkPad) * size
	dst, err := e.alloc(name, n)
	if err != nil {
		return 0, err
	}
	if err := cu.MemsetD8(dst, 0, n); err != nil {
		e.free(name, &dst)
		return 0, fmt.Errorf("gpu: clear %s: %w", name, err)
	}
	for _, r := range pl.runs {
		at, from, k := int64(r[1])*size, int64(r[0])*size, int64(r[2])*size
		if err := cu.MemcpyDtoDAsync(dst+cu.DevicePtr(at), src+cu.DevicePtr(from), k, cu.Stream{}); err != nil {
			e.free(name, &dst)
			return 0, fmt.Errorf("gpu: copy hubs of %s: %w", name, err)
		}
	}
	if err := cu.Synchronize(); err != nil {
		e.free(name, &dst)
		return 0, fmt.Errorf("gpu: copy hubs of %s: %w", name, err)
	}
	return dst, nil
}

// useStripedLabels points the engine at the group's MetaPath label tables
// in the stripes and, with hub copies, copies the hubs' segments to the
// device too (a vertex's segments fill its edge range, so the edges' runs
// serve). s.mu held; device thread.
func (e *Engine) useStripedLabels() error {
	s := e.cfg.stripes
	e.segBuilt = false
	e.dSegOffsets, e.dSegTargets, e.dSegAlias = s.ptr("labels.offsets"), s.ptr("labels.targets"), s.ptr("labels.alias")
	pl := e.placed
	if pl != nil && pl.hubs {
		pl.hSegTargets, pl.hSegAlias, pl.segSplit = e.dSegTargets, e.dSegAlias, pl.layout.split
		e.dSegTargets, e.dSegAlias = 0, 0
		t, err := e.hubCopy("labels.targets", pl.hSegTargets, 4)
		if err != nil {
			return err
		}
		e.dSegTargets = t
		if pl.hSegAlias != 0 {
			if e.dSegAlias, err = e.hubCopy("labels.alias", pl.hSegAlias, 16); err != nil {
				return err
			}
		}
	}
	e.segBuilt = true
	return nil
}

// wholeArrays are the graph's edge arrays in their original layout: the
// stripes' for an engine with hub copies, else the engine's.
func (e *Engine) wholeArrays() (targets, weights, labels cu.DevicePtr) {
	if pl := e.placed; pl != nil && pl.hubs {
		return pl.hTargets, pl.hWeights, pl.hLabels
	}
	return e.dTargets, e.dWeights, e.dLabels
}

// buildStripes uploads the edge arrays into the stripes and builds the
// alias table there (s.mu held). On failure it frees what it allocated.
func (e *Engine) buildStripes() (err error) {
	g, s := e.g, e.cfg.stripes
	defer func() {
		if err != nil {
			for _, name := range []string{"graph.targets", "graph.weights", "graph.labels", "alias.table"} {
				var p cu.DevicePtr
				s.free(name, &p)
			}
		}
	}()
	targets, err := stripedUpload(e, "graph.targets", g.Targets)
	if err != nil {
		return err
	}
	weights, err := stripedUpload(e, "graph.weights", g.Weights)
	if err != nil {
		return err
	}
	if _, err = stripedUpload(e, "graph.labels", g.Labels); err != nil {
		return err
	}
	if !g.Weighted() || g.NumEdges() == 0 {
		return nil
	}
	E := g.NumEdges()
	table, err := s.alloc("alias.table", E*16)
	if err != nil {
		return err
	}
	if err := e.aliasSegments(e.dOffsets, targets, weights, table, uint64(g.NumVertices())); err != nil {
		return err
	}
	e.tableBytes += E * 16
	return nil
}

// stripedUpload copies data into a new array of the stripes, padded to 64
// bytes as upload pads (s.mu held); nothing for an empty array.
func stripedUpload[T any](e *Engine, name string, data []T) (cu.DevicePtr, error) {
	if len(data) == 0 {
		return 0, nil
	}
	n := int64(len(data)) * int64(unsafe.Sizeof(data[0]))
	p, err := e.cfg.stripes.alloc(name, (n+63)&^63)
	if err != nil {
		return 0, err
	}
	if err := e.copyHtoD(p, unsafe.Pointer(&data[0]), n); err != nil {
		return 0, fmt.Errorf("gpu: upload %s: %w", name, err)
	}
	return p, nil
}

// releaseStriped lets go of the group's arrays: the engine's pointers are
// zeroed, and the last engine of the group frees the stripes (device
// thread).
func (e *Engine) releaseStriped() {
	if !e.striped {
		return
	}
	e.striped = false
	if e.placed == nil || !e.placed.hubs {
		// Otherwise these are the engine's own hub copies, which Close frees.
		e.dTargets, e.dWeights, e.dLabels, e.dAlias = 0, 0, 0, 0
		e.dSegTargets, e.dSegAlias = 0, 0
	}
	e.dSegOffsets = 0
	s := e.cfg.stripes
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs--; s.refs > 0 {
		return
	}
	for name := range s.arrays {
		var p cu.DevicePtr
		s.free(name, &p)
	}
	s.graphBuilt, s.labelsBuilt = false, false
}

var _ Partitioned = (*Engine)(nil)

// Stripes is the engine's partitioned store, nil when it holds the whole
// graph itself.
func (e *Engine) Stripes() *Stripes { return e.cfg.stripes }

// FreeMemory is the free memory of device ordinal, as an engine opened on
// it would see before allocating anything.
func FreeMemory(ordinal int) (int64, error) {
	d, err := openDevice(ordinal)
	if err != nil {
		return 0, err
	}
	defer d.close()
	var free int64
	err = d.do(func() error {
		var err error
		if free, _, err = cu.MemInfo(); err != nil {
			return fmt.Errorf("gpu: memory info of device %d: %w", ordinal, err)
		}
		return nil
	})
	return free, err
}
