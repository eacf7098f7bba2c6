package walkcmd

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// TestFingerprintHashesSeedsInBlocks: the seeds go to the hash in blocks, so
// the digest must be that of the description followed by every seed's
// external id, whatever the block boundaries (a run of --seeds all spans
// several blocks; manifests written earlier keep matching).
func TestFingerprintHashesSeedsInBlocks(t *testing.T) {
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 15, EdgeFactor: 2, Seed: 3, Name: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	req := runRequest{Tool: "walkstage walk", Graph: g.Name, Seed: 42, PerSeed: 2}
	for _, n := range []int{0, 1, 8191, 8192, 8193, 3*8192 + 5} {
		seeds := make([]uint32, n)
		for i := range seeds {
			seeds[i] = uint32(i*7) % uint32(g.NumVertices())
		}
		h := sha256.New()
		desc, _ := json.Marshal(req)
		h.Write(desc)
		for _, s := range seeds {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], uint64(g.ExternalID(s)))
			h.Write(b[:])
		}
		want := "walk-" + hex.EncodeToString(h.Sum(nil)[:16])
		if got := req.fingerprint(g, seeds); got != want {
			t.Errorf("%d seeds: fingerprint %s, want %s", n, got, want)
		}
	}
}
