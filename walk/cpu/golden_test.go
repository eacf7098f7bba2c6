package cpu

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// goldenWalks are SHA-256 digests of every walk that the CPU engine served
// before its walkers were reworked for speed (issue 20). The GPU engine is
// held to the CPU engine's walks, so a faster walker must serve these very
// walks, bit for bit; a digest that changes here means the walks changed,
// which no optimisation may do. Each digest covers, for one algorithm, the
// 80-step walks from every vertex of two R-MAT graphs (one undirected with
// weights and labels, one directed with dead ends), in walk-id order: id,
// length, vertices.
var goldenWalks = map[string]string{
	"deepwalk":          "3a2042dd85cf3909e89f256ab26899840d05c62b0cf2a23c3774edd019420858",
	"deepwalk-weighted": "ebc2ed0268f8915d7c1b371a197067816a7010e6c5a4a2995a8d7b1cc8a260db",
	"deepwalk-zprs":     "8f52f7e66163188c093cd50955773fff33e7110d485b4979931241ac128e0504",
	"ppr":               "9fc2752964dedae9a03dcbb0aa23725c0d32c47422fa9d89bb18d07b8febbbfd",
	"ppr-weighted":      "e92c145b4516f33e8828c77e0e47731ee0996224b3a940472fb225a127e74cf7",
	"node2vec":          "22ae9c859b68f9324b9f5ad9275269f68aa0be18a3670c2a9a0b95d59dd093ec",
	"node2vec-uniform":  "d359de562ffee3bb95d19bcd7da82c716e61a31dd495b08635aca4c15aebb2cf",
	"metapath":          "3bdbd87743ec1dcfd57da165972b7e546113ba487b141c88e48d5dba4494f10f",
	"metapath-uniform":  "8f081019582bd2009ec7156fab94d45b55a746a8a8e51478a525d8ed9daf809e",
}

// goldenAlgorithms are the walks the golden digests cover: the algorithms
// of the bench suite and of allAlgorithms, at the bench's length.
func goldenAlgorithms() map[string]walk.Algorithm {
	return map[string]walk.Algorithm{
		"deepwalk":          {Kind: walk.DeepWalk, Length: 80},
		"deepwalk-weighted": {Kind: walk.DeepWalk, Length: 80, Weighted: true},
		"deepwalk-zprs":     {Kind: walk.DeepWalk, Length: 80, Weighted: true, Stepper: walk.StepperZPRS},
		"ppr":               {Kind: walk.PPR, Length: 80, StopProb: 0.2},
		"ppr-weighted":      {Kind: walk.PPR, Length: 80, StopProb: 0.05, Weighted: true},
		"node2vec":          {Kind: walk.Node2Vec, Length: 80, P: 2, Q: 0.5, Weighted: true},
		"node2vec-uniform":  {Kind: walk.Node2Vec, Length: 80, P: 0.5, Q: 2},
		"metapath":          {Kind: walk.MetaPath, Length: 80, Schema: []uint8{0, 1, 2, 3, 4}, Weighted: true},
		"metapath-uniform":  {Kind: walk.MetaPath, Length: 80, Schema: []uint8{2, 0}},
	}
}

func goldenGraphs(t testing.TB) []*graph.Graph {
	t.Helper()
	var gs []*graph.Graph
	for _, o := range []graph.RMATOptions{
		{Scale: 13, EdgeFactor: 16, Seed: 7, Undirected: true, Weighted: true, Labels: 5},
		{Scale: 12, EdgeFactor: 4, Seed: 8, Weighted: true, Labels: 5},
	} {
		g, err := graph.GenerateRMAT(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		gs = append(gs, g)
	}
	return gs
}

// walkDigest hashes the walks of a on every graph, walked by engines made
// with opts.
func walkDigest(t *testing.T, gs []*graph.Graph, a walk.Algorithm, opts ...Option) string {
	h := sha256.New()
	var b [8]byte
	for gi, g := range gs {
		e, err := New(g, opts...)
		if err != nil {
			t.Fatal(err)
		}
		starts := make([]uint32, g.NumVertices())
		for i := range starts {
			starts[i] = uint32(i)
		}
		walks := collect(t, e, []walk.Job{{Algorithm: a, Seed: 42 + uint64(gi), Starts: starts}})[0]
		for id, w := range walks {
			binary.LittleEndian.PutUint64(b[:], uint64(id))
			h.Write(b[:])
			binary.LittleEndian.PutUint32(b[:4], uint32(len(w)))
			h.Write(b[:4])
			for _, v := range w {
				binary.LittleEndian.PutUint32(b[:4], v)
				h.Write(b[:4])
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// The engine serves the walks it served before (goldenWalks), on every
// table layout and schedule.
func TestWalksMatchGoldenDigests(t *testing.T) {
	gs := goldenGraphs(t)
	configs := []struct {
		name string
		opts []Option
	}{
		{"fused", []Option{WithWorkers(2), WithFusedTableLimit(1 << 40)}},
		{"packed", []Option{WithWorkers(3), WithChunkSize(333), WithFusedTableLimit(0)}},
	}
	for name, a := range goldenAlgorithms() {
		for _, c := range configs {
			got := walkDigest(t, gs, a, c.opts...)
			if want, ok := goldenWalks[name]; !ok {
				t.Errorf("%s: no golden digest; this engine gives %q", name, got)
			} else if got != want {
				t.Errorf("%s on the %s configuration: walks digest %s, want %s: the walks changed", name, c.name, got, want)
			}
		}
	}
}
