package message

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"

	"github.com/walkstage/walkstage/walk"
)

// ReasonBatchIDConflict rejects a request whose batch id already has a
// complete output written for a different request (another fingerprint):
// the earlier output is kept, never overwritten.
const ReasonBatchIDConflict Reason = "batch_id_conflict"

// Fingerprint identifies what a request asks for, independent of how its
// JSON was spelled: the graph it names, the algorithm and its parameters,
// the walks per seed, the seeds walked (in order) and the RNG seed. Two
// messages with the same batch id and the same fingerprint ask for the
// same walks, so a redelivery whose output already exists can be answered
// from its manifest; the same batch id with another fingerprint is a
// conflict, never an overwrite. The format is "v1:" and 32 hex digits (the
// first half of a SHA-256).
func (r *Request) Fingerprint() string {
	h := sha256.New()
	var buf [8]byte
	u64 := func(v uint64) {
		binary.LittleEndian.PutUint64(buf[:], v)
		h.Write(buf[:])
	}
	str := func(s string) {
		u64(uint64(len(s)))
		h.Write([]byte(s))
	}
	a := r.Algorithm
	str("walkstage-request-v1")
	str(r.Graph)
	u64(uint64(a.Kind))
	u64(uint64(a.Length))
	if a.Weighted {
		u64(1)
	} else {
		u64(0)
	}
	u64(math.Float64bits(a.StopProb))
	u64(math.Float64bits(a.P))
	u64(math.Float64bits(a.Q))
	str(string(a.Schema))
	u64(uint64(a.Stepper))
	u64(uint64(r.WalksPerSeed))
	u64(r.RNGSeed)
	u64(uint64(len(r.Seeds)))
	for _, s := range r.Seeds {
		u64(uint64(s))
	}
	// String ids (a graph with string ids; Seeds is then empty) follow,
	// so that integer-id requests keep the fingerprint they always had.
	if r.StringSeeds != nil {
		str("string-seeds")
		u64(uint64(len(r.StringSeeds)))
		for _, s := range r.StringSeeds {
			str(s)
		}
	}
	// Skipped seeds do not change the walks but do change the event.
	u64(uint64(r.Skipped))
	// Temporal walks add their time parameters and the times column;
	// other requests keep the fingerprint they always had.
	if t := a.Time; a.Kind == walk.Temporal {
		str("temporal")
		u64(uint64(t.Bias))
		u64(math.Float64bits(t.Scale))
		for _, x := range []int64{t.Start, t.MaxGap} {
			u64(uint64(x))
		}
		for _, f := range []bool{t.HasStart, t.HasMaxGap, t.Backward, r.WithTimes} {
			if f {
				u64(1)
			} else {
				u64(0)
			}
		}
	}
	// Output "visits" adds its parameters and queries; walk requests keep
	// the fingerprint they always had.
	if v := r.Visits; v != nil {
		p := v.Params
		str("visits")
		for _, x := range []int64{int64(p.TopK), p.StepsPerQuery, int64(p.WalksPerSeed), p.MinVisits, p.NP, p.NV} {
			u64(uint64(x))
		}
		for _, f := range []bool{p.ExcludeSeeds, p.ExcludeNeighbors} {
			if f {
				u64(1)
			} else {
				u64(0)
			}
		}
		u64(uint64(len(v.Queries)))
		for q, vq := range v.Queries {
			str(v.QueryIDs[q])
			u64(uint64(len(vq.Starts)))
			u64(uint64(len(vq.Weights)))
			for _, w := range vq.Weights {
				u64(math.Float64bits(w))
			}
		}
	}
	// Sampling requests add their parameters; the algorithm fields above
	// are then zero.
	if sp := r.Sample; sp != nil {
		p := sp.Params
		str("samples")
		u64(uint64(p.Kind))
		u64(uint64(p.InstancesPerSeed))
		for _, list := range [][]int{p.Fanouts, p.LayerSizes} {
			u64(uint64(len(list)))
			for _, k := range list {
				u64(uint64(k))
			}
		}
		for _, x := range []int{p.Depth, p.MaxVertices, p.FrontierSize, p.Samples, int(p.EdgeBias.Kind), int(p.EdgeBias.Label)} {
			u64(uint64(x))
		}
		u64(math.Float64bits(p.BurnProb))
		for _, f := range []bool{p.Replace, sp.EdgeWeight} {
			if f {
				u64(1)
			} else {
				u64(0)
			}
		}
	}
	sum := h.Sum(nil)
	return "v1:" + hex.EncodeToString(sum[:16])
}
