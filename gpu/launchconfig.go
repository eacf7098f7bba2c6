//go:build cuda

package gpu

// The one launch configuration: threads per block of every kernel, as the
// launches use them. Kernels with __launch_bounds__ in kernels/ declare the
// same number (the constants named beside each); TestKernelBlocksMatch-
// LaunchBounds reads each compiled kernel's maximum threads per block on the
// device, so changing one side alone fails there instead of at a launch.
const (
	threadBlock    = 256 // kThreadBlock, kernels/walk.cu: walk_thread_*
	reservoirBlock = 256 // kBlockThreads, kernels/samplers.cuh: walk_reservoir_*
	packThreads    = 256 // kPackThreads, kernels/scan.cuh: pack_* (kernels/pack.cu)
	visitThreads   = 256 // kVisitThreads, kernels/visits.cuh: visits_*
	sampleThreads  = 256 // kSampleThreads, kernels/sample.cuh: sample_neighbor_hop (a warp a task), sample_layer (a warp an instance), sample_frontier, sample_fire (a warp an instance); sample_neighbor_resolve, _layout, sample_add_counts (a thread an element)
	scanThreads    = 256 // kScanThreads, kernels/sample_columns.cuh: scan_u32_tiles, scan_u64_sums, scan_u32_apply (scanPerThread values a thread)
	scanPerThread  = 8   // kScanPerThread, kernels/sample_columns.cuh
	// tableThreads sizes the table builds, which carry no launch bounds
	// (one warp per vertex; any multiple of 32 up to 1024 works).
	tableThreads = 128
	// localPoolSlots is kLocalPoolSlots, kernels/walk.cu: FlowWalker's
	// local task pool per block, also the reservoir kernels' walks a block.
	localPoolSlots = 64
)

// kernelBlock is one kernel's launch configuration.
type kernelBlock struct {
	name    string
	threads int
	// bounded: the kernel declares __launch_bounds__(threads), so its
	// compiled maximum must equal threads; otherwise it must allow it.
	bounded bool
}

// kernelBlocks lists every kernel the engine launches.
func kernelBlocks() []kernelBlock {
	var ks []kernelBlock
	for _, name := range modeKernels {
		for _, placed := range []string{"", "_placed"} {
			ks = append(ks, kernelBlock{name + placed, threadBlock, true}, kernelBlock{name + placed + "_full", threadBlock, true})
		}
	}
	ks = append(ks, kernelBlock{"host_read_bench", threadBlock, true})
	for _, name := range []string{"walk_reservoir_zprs", "walk_reservoir_zprs_n2v", "walk_reservoir_dprs", "walk_reservoir_dprs_n2v"} {
		ks = append(ks, kernelBlock{name, reservoirBlock, true})
	}
	for _, name := range []string{"pack_partials", "pack_scan_partials", "pack_rows"} {
		ks = append(ks, kernelBlock{name, packThreads, true})
	}
	for _, name := range []string{"visits_count_static", "visits_count_ppr", "visits_compact"} {
		ks = append(ks, kernelBlock{name, visitThreads, true})
	}
	ks = append(ks, kernelBlock{"sample_neighbor_hop", sampleThreads, true}, kernelBlock{"sample_neighbor_resolve", sampleThreads, true},
		kernelBlock{"sample_neighbor_layout", sampleThreads, true}, kernelBlock{"sample_add_counts", sampleThreads, true},
		kernelBlock{"sample_row_counts", sampleThreads, true}, kernelBlock{"sample_rows_to_columns", sampleThreads, true},
		kernelBlock{"scan_u32_tiles", scanThreads, true}, kernelBlock{"scan_u64_sums", scanThreads, true}, kernelBlock{"scan_u32_apply", scanThreads, true},
		kernelBlock{"sample_layer", sampleThreads, true},
		kernelBlock{"sample_frontier", sampleThreads, true}, kernelBlock{"sample_fire", sampleThreads, true})
	for _, name := range []string{"alias_build", "label_tables_build", "overlay_records", "overlay_dead_edges"} {
		ks = append(ks, kernelBlock{name, tableThreads, false})
	}
	return ks
}
