package gpu

import "github.com/walkstage/walkstage/walk"

// This file holds the engine's host-side planning, free of CUDA so default
// builds test it: grouping jobs into launches and cutting groups into
// batches.

// groupJobs groups jobs with equal algorithms, in order of first appearance.
func groupJobs(jobs []walk.Job) [][]*walk.Job {
	var groups [][]*walk.Job
outer:
	for i := range jobs {
		j := &jobs[i]
		for k, grp := range groups {
			if sameAlgorithm(grp[0].Algorithm, j.Algorithm) {
				groups[k] = append(grp, j)
				continue outer
			}
		}
		groups = append(groups, []*walk.Job{j})
	}
	return groups
}

// sameAlgorithm says whether two jobs can share launches: equal parameters
// and the same sampler on this engine. MetaPath's automatic choice (label
// tables) differs from a forced ZPRS although both resolve to ZPRS.
func sameAlgorithm(a, b walk.Algorithm) bool {
	if a.Kind != b.Kind || a.Length != b.Length || a.Weighted != b.Weighted || a.StopProb != b.StopProb ||
		a.P != b.P || a.Q != b.Q || a.ResolvedSampler() != b.ResolvedSampler() || len(a.Schema) != len(b.Schema) {
		return false
	}
	if a.Kind == walk.MetaPath && a.Sampler != b.Sampler {
		return false
	}
	for i := range a.Schema {
		if a.Schema[i] != b.Schema[i] {
			return false
		}
	}
	return true
}

// batch is a run of consecutive walks of one algorithm group: segments of
// jobs, each a walk-id range.
type batch struct {
	segs  []segment
	walks int64
}

type segment struct {
	job    *walk.Job
	lo, hi int // walk ids [lo, hi)
	seed   uint32
}

// cutBatches cuts a group's walks, job after job in walk-id order, into
// batches of at most per walks.
func cutBatches(grp []*walk.Job, per int64) []*batch {
	var batches []*batch
	cur := &batch{}
	for _, j := range grp {
		for lo := 0; lo < len(j.Starts); {
			take := min(int64(len(j.Starts)-lo), per-cur.walks)
			cur.segs = append(cur.segs, segment{job: j, lo: lo, hi: lo + int(take)})
			cur.walks += take
			lo += int(take)
			if cur.walks == per {
				batches = append(batches, cur)
				cur = &batch{}
			}
		}
	}
	if cur.walks > 0 {
		batches = append(batches, cur)
	}
	return batches
}

const packTile = 1024 // kPackTile in kernels/compact.cuh

// packTiles is the number of pack_rows tiles of a batch of n walks.
func packTiles(n int64) int64 { return (n + packTile - 1) / packTile }
