package message

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// knownIDs is a VertexResolver over a fixed set (a live graph's snapshot
// in the stage).
type knownIDs map[int64]uint32

func (k knownIDs) DenseID(ext int64) (uint32, bool) { v, ok := k[ext]; return v, ok }

// edge_offsets is read as partition -> offset; with a live graph's
// resolver, seeds it does not know yet are kept for the stage to resolve
// after the wait (Unresolved), and only then: without edge_offsets an
// unknown seed is rejected at once.
func TestEdgeOffsets(t *testing.T) {
	g, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}, {Src: 1, Dst: 0}}, graph.BuildOptions{Name: "g", DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	live := knownIDs{0: 0, 1: 1, 100: 2}
	for _, tc := range []struct {
		name, offsets string
		seeds         string
		resolver      VertexResolver
		want          map[int32]int64
		unresolved    bool
		reject        string // substring of the rejection; "" = accepted
	}{
		{name: "absent", seeds: "[1]", resolver: live},
		{name: "offsets", offsets: `{"0": 123, "7": 0}`, seeds: "[1]", resolver: live, want: map[int32]int64{0: 123, 7: 0}},
		{name: "added vertex known", seeds: "[100]", resolver: live},
		{name: "unknown without offsets", seeds: "[200]", resolver: live, reject: "not in the graph"},
		{name: "unknown waits for offsets", offsets: `{"0": 5}`, seeds: "[1, 200]", resolver: live, want: map[int32]int64{0: 5}, unresolved: true},
		{name: "no live graph", offsets: `{"0": 5}`, seeds: "[200]", want: map[int32]int64{0: 5}, reject: "not in the graph"},
		{name: "negative offset", offsets: `{"0": -1}`, seeds: "[1]", reject: "negative"},
		{name: "bad partition", offsets: `{"x": 1}`, seeds: "[1]", reject: "not a partition number"},
		{name: "padded partition", offsets: `{"01": 1}`, seeds: "[1]", reject: "not a partition number"},
		{name: "not an object", offsets: `[1]`, seeds: "[1]", reject: "edge_offsets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"version":1,"batch_id":"b","algorithm":"deepwalk","seeds":` + tc.seeds
			if tc.offsets != "" {
				body += `,"edge_offsets":` + tc.offsets
			}
			body += "}"
			lim := DefaultLimits()
			lim.Vertices = tc.resolver
			r, err := DecodeRequest(nil, []byte(body), g, lim)
			var re *RejectError
			switch {
			case tc.reject != "":
				if !errors.As(err, &re) || !strings.Contains(re.Msg, tc.reject) {
					t.Fatalf("want a rejection with %q, got %v", tc.reject, err)
				}
			case err != nil:
				t.Fatal(err)
			case !maps.Equal(r.EdgeOffsets, tc.want) || r.Unresolved != tc.unresolved:
				t.Fatalf("edge offsets %v unresolved %v, want %v %v", r.EdgeOffsets, r.Unresolved, tc.want, tc.unresolved)
			}
		})
	}
}
