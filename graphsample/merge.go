package graphsample

// Merged calls: several requests' instances sampled in one call (a stage
// merging the sampling requests of a micro-batch, as it merges walks), each
// instance under its own request's Philox key (Segment), so every request
// gets the edges its own call gives it.

// MergePart is one request's share of a merged call: its instances First
// .. First+Count-1 (its own numbering) of p with seed Seed over Starts.
type MergePart struct {
	Seed         uint64
	Starts       []uint32
	First, Count int
}

// Merge lays parts of requests that share p but for the seed out as one
// call: the parameters with a segment a part (and InstancesPerSeed 1) and
// the starts, each instance's seed set in its own place. Instance k of
// the call is the parts' k-th, in order; SampleRange(g, merged, starts, 0,
// -1) samples each part's instances as SampleRange(g, p with the part's
// seed, part.Starts, part.First, part.Count) does, edge for edge.
func Merge(p SampleParams, parts []MergePart) (SampleParams, []uint32) {
	per := p.SeedsPerInstance()
	total := 0
	for _, pt := range parts {
		total += pt.Count
	}
	starts := make([]uint32, 0, total*per)
	segs := make([]Segment, 0, len(parts))
	for _, pt := range parts {
		if pt.Count == 0 {
			continue
		}
		segs = append(segs, Segment{First: len(starts) / per, Seed: pt.Seed, Base: uint32(pt.First)})
		for i := pt.First; i < pt.First+pt.Count; i++ {
			set := i / p.InstancesPerSeed
			starts = append(starts, pt.Starts[set*per:(set+1)*per]...)
		}
	}
	m := p
	m.InstancesPerSeed, m.Segments = 1, segs
	return m, starts
}
