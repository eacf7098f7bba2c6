package catalog

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// A version published with a live graph's watermark carries it in its
// descriptor and in CURRENT; re-publishing the same file at a later
// watermark moves both to it; a plain publish carries none; a pointer of a
// newer format, or with offsets but no topic, is refused.
func TestPublishRecordsEdgeOffsets(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, err := Open(ctx, store(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f, v := graphFile(t, 1)
			eventTime := int64(1764300000000)
			for k, offs := range []map[int32]int64{{0: 12, 2: 7}, {0: 15, 1: 3, 2: 7}} {
				var et *int64
				if k == 1 {
					et = &eventTime // a live graph with a time window
				}
				p, err := c.PublishWith(ctx, f, PublishOptions{EdgeTopic: "edges", EdgeOffsets: offs, EdgeEventTime: et})
				if err != nil {
					t.Fatal(err)
				}
				cur, err := c.Current(ctx)
				if err != nil {
					t.Fatal(err)
				}
				d, err := c.descriptor(ctx, v)
				if err != nil {
					t.Fatal(err)
				}
				for what, q := range map[string]Pointer{"published": p, "CURRENT": cur, "descriptor": d} {
					if q.Format != FormatVersion || q.EdgeTopic != "edges" || !maps.Equal(q.EdgeOffsets, offs) || q.Version != v || !sameTime(q.EdgeEventTime, et) {
						t.Fatalf("%s: %+v, want format %d, edge offsets %v of topic edges", what, q, FormatVersion, offs)
					}
				}
			}
			f2, _ := graphFile(t, 2)
			p, err := c.Publish(ctx, f2)
			if err != nil || p.EdgeOffsets != nil || p.EdgeTopic != "" {
				t.Fatalf("plain publish: %+v, %v", p, err)
			}
			if _, err := c.PublishWith(ctx, f2, PublishOptions{EdgeOffsets: map[int32]int64{0: 1}}); err == nil {
				t.Fatal("edge offsets without a topic were published")
			}
			for _, tc := range []struct{ edit, want string }{
				{`"format": 3`, "newer than this walkstage reads"},
				{`"edge_offsets": {"0": 4}`, "edge_offsets without edge_topic"},
				{`"edge_topic": "e", "edge_offsets": {"0": -4}`, "negative"},
			} {
				var m map[string]any
				b, _ := json.Marshal(p)
				_ = json.Unmarshal(b, &m)
				var extra map[string]any
				if err := json.Unmarshal([]byte("{"+tc.edit+"}"), &extra); err != nil {
					t.Fatal(err)
				}
				maps.Copy(m, extra)
				b, _ = json.Marshal(m)
				if err := c.b.WriteAll(ctx, c.PointerKey(), b, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := c.Current(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("pointer with %s: %v, want %q", tc.edit, err, tc.want)
				}
			}
		})
	}
}
