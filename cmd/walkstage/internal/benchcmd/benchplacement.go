package benchcmd

import (
	"fmt"
	"io"

	"github.com/walkstage/walkstage/gpu"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/hybrid"
)

// benchPlacement prints the GPU engine's placement plan, if it has one,
// and with hostRead > 0 the host-read microbenchmark: the bound on the
// steps a plan's host half can serve.
func benchPlacement(eng any, hostRead int64, w io.Writer) error {
	if p, ok := eng.(gpu.Partitioned); ok && p.Stripes() != nil {
		fmt.Fprintln(w, "placement: graph", p.Stripes().String())
	} else if s, ok := eng.(gpu.Streamer); ok && s.StreamPlan() != nil {
		fmt.Fprintln(w, s.StreamPlan().String())
		// Under --gpu-stream auto a placement plan is held beside it,
		// and each batch walks under the faster of the two.
		if p, ok := eng.(gpu.Placer); ok && p.Placement() != nil {
			fmt.Fprintln(w, "beside it,", p.Placement().String())
		}
	} else if p, ok := eng.(gpu.Placer); ok {
		if pl := p.Placement(); pl != nil {
			fmt.Fprintln(w, pl.String())
		} else {
			fmt.Fprintln(w, "placement: the whole graph is on the device")
		}
	}
	if hostRead <= 0 {
		return nil
	}
	hr, ok := eng.(gpu.HostReadBencher)
	if !ok {
		return fmt.Errorf("--host-read-bytes needs the GPU engine")
	}
	var regions []int64
	for r := int64(256 << 20); r < hostRead; r *= 2 {
		regions = append(regions, r)
	}
	r, err := hr.HostReadBench(append(regions, hostRead)...)
	if err != nil {
		return err
	}
	for _, row := range r.Rows {
		fmt.Fprintf(w, "random %d-byte reads over %d MiB of %s memory: %.0f M/s\n", row.ReadBytes, row.RegionBytes>>20, row.Memory, row.ReadsPerSec/1e6)
	}
	fmt.Fprintf(w, "host-to-device copy from pinned memory: %.1f GB/s\n", r.CopyGBps)
	return nil
}

// benchStreamStats prints what a streaming GPU engine's last run copied:
// visits, partition copies, bytes and bytes per step (nothing for other
// engines).
func benchStreamStats(eng any, w io.Writer) {
	s, ok := eng.(gpu.Streamer)
	if !ok || s.StreamPlan() == nil {
		return
	}
	st := s.StreamStats()
	fmt.Fprintf(w, "  stream: %d batches streamed (%d finished in place), %d read in place, %d under the placement plan; %d visits (%.0f walkers a visit), %d partition copies, %.2f GB copied, %.0f bytes a step\n",
		st.Batches, st.Tails, st.InPlaceBatches, st.PlacedBatches, st.Visits, float64(st.Walkers)/float64(max(st.Visits, 1)), st.Copies, float64(st.BytesCopied)/1e9, float64(st.BytesCopied)/float64(max(st.Steps, 1)))
	if st.LastChoice != "" {
		fmt.Fprintf(w, "  last batch: %s\n", st.LastChoice)
	}
	if st.Scans > 0 {
		fmt.Fprintf(w, "  node2vec: %d steps decided by the exact scan on the host (after %d rejected proposals)\n", st.Scans, walk.MaxRejections)
	}
	if s.StreamPlan().Disk != nil {
		fmt.Fprintf(w, "  from disk: %d reads, %.2f GB read in %.2f s (%.2f GB/s while reading; direct %v), %d copies from a ring buffer without a read; walks copied back in %d window pieces\n",
			st.Reads, float64(st.BytesRead)/1e9, st.ReadSeconds, float64(st.BytesRead)/1e9/max(st.ReadSeconds, 1e-9), st.Direct, st.RingHits, st.ResultPieces)
	}
}

// benchHybridShare prints how the hybrid engine split the case's last run
// between the CPU and the GPU engine, and records it in row (nothing for
// other engines). bench reports the best of --repeat runs; the split is
// the last run's, which with --repeat 2 or more is sized by the rates the
// earlier runs measured, as a stage's batches are.
func benchHybridShare(eng any, row *benchRow, w io.Writer) {
	h, ok := eng.(*hybrid.Engine)
	if !ok {
		return
	}
	sh := h.LastShare()
	row.CPUStepShare, row.DuplicateWalks = sh.CPUStepShare(), sh.Duplicates
	detached := ""
	if sh.GPUDetached {
		detached = "; the GPU's last range was still walking when the CPU had emitted it all"
	}
	fmt.Fprintf(w, "  hybrid (last run, %s): cpu %.1f%% of the steps (%d walks in %d ranges), gpu %.1f%% (%d walks in %d ranges); %d walks walked by both, emitted once%s\n",
		sh.Mode, 100*sh.CPUStepShare(), sh.CPUWalks, sh.CPURanges, 100*(1-sh.CPUStepShare()), sh.GPUWalks, sh.GPURanges, sh.Duplicates, detached)
}
