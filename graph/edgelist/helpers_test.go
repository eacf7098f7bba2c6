package edgelist

import (
	"reflect"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// sameGraph compares everything a user can observe about two graphs. It is
// the graph package's test helper of the same name: test helpers do not
// cross packages, and this one is short enough to keep twice.
func sameGraph(t *testing.T, got, want *graph.Graph) {
	t.Helper()
	if got.Name != want.Name || got.Version != want.Version || got.NumLabels != want.NumLabels {
		t.Fatalf("name/version/labels = %q %q %d, want %q %q %d", got.Name, got.Version, got.NumLabels, want.Name, want.Version, want.NumLabels)
	}
	eq := func(what string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s differ:\n got %v\nwant %v", what, a, b)
		}
	}
	eq("offsets", got.Offsets, want.Offsets)
	eq("targets", nonNil(got.Targets), nonNil(want.Targets))
	eq("weights", got.Weights == nil, want.Weights == nil)
	eq("labels", got.Labels == nil, want.Labels == nil)
	eq("ids", got.IDs == nil, want.IDs == nil)
	if got.Weights != nil {
		eq("weights", nonNil(got.Weights), nonNil(want.Weights))
	}
	if got.Labels != nil {
		eq("labels", nonNil(got.Labels), nonNil(want.Labels))
	}
	eq("timed", got.Timed(), want.Timed())
	eq("string ids", got.HasStringIDs(), want.HasStringIDs())
	if got.Timed() {
		eq("times", nonNil(got.Times), nonNil(want.Times))
		eq("bytime", nonNil(got.ByTime), nonNil(want.ByTime))
	}
	if got.HasStringIDs() {
		eq("string offsets", got.StrOffsets, want.StrOffsets)
		eq("string bytes", nonNil(got.StrBytes), nonNil(want.StrBytes))
		for v := range got.NumVertices() {
			s := got.ExternalString(uint32(v))
			if d, ok := got.DenseIDString(s); !ok || d != uint32(v) {
				t.Fatalf("DenseIDString(%q) = %d, %v; want %d", s, d, ok, v)
			}
		}
	}
	if got.IDs != nil {
		eq("ids", nonNil(got.IDs), nonNil(want.IDs))
		for v := range got.IDs {
			if d, ok := got.DenseID(got.IDs[v]); !ok || d != uint32(v) {
				t.Fatalf("DenseID(%d) = %d, %v; want %d", got.IDs[v], d, ok, v)
			}
		}
	}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
