package source

import (
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/livegraph"
)

// A binary edge record is decoded into a slice from the reader's free list
// once the applier has released an earlier one: decoding it allocated 48
// bytes an update (a 4,096-update record, 192 KiB) for the collector,
// about a quarter GB a second beside the walks at the 16-core host's 5 M
// updates a second. JSON records, and slices past the list's bound, are
// left to the collector.
func TestEdgeBatchReusesReleasedUpdates(t *testing.T) {
	r, err := NewEdgeReader(EdgeReaderConfig{Kafka: KafkaOptions{Brokers: []string{"127.0.0.1:1"}}, Topic: "edges", DLQTopic: "dlq"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ups := make([]livegraph.Update, 4096)
	for i := range ups {
		ups[i] = livegraph.Update{Op: livegraph.Insert, Src: int64(i), Dst: int64(i + 1)}
	}
	m := kafka.Message{Offset: 7, Value: livegraph.AppendBinary(nil, ups)}
	want, err := livegraph.Decode(m.Value)
	if err != nil {
		t.Fatal(err)
	}

	b := r.batch(3, m)
	if b.Rejected != nil || b.Partition != 3 || b.Offset != 7 || len(b.Updates) != len(want) {
		t.Fatalf("batch %d@%d: %d updates, rejected %v", b.Partition, b.Offset, len(b.Updates), b.Rejected)
	}
	first := &b.Updates[0]
	b.Release()
	if b.Updates != nil {
		t.Fatal("Release left the batch its updates")
	}
	allocs := testing.AllocsPerRun(50, func() {
		b := r.batch(3, m)
		if &b.Updates[0] != first {
			t.Fatal("the record was decoded into a new slice, not the released one")
		}
		for i, u := range b.Updates {
			if u != want[i] {
				t.Fatalf("update %d: %+v, want %+v", i, u, want[i])
			}
		}
		b.Release()
	})
	if allocs != 0 {
		t.Errorf("%.1f allocations a binary record decoded after a release, want 0", allocs)
	}

	// A bad record hands its slice back at once and is rejected whole.
	bad := append([]byte(nil), m.Value...)
	bad[12+4] = 9 // the fifth update's op byte (after the 12-byte header)
	if b := r.batch(3, kafka.Message{Value: bad}); b.Rejected == nil || len(b.Updates) != 0 {
		t.Fatalf("bad record: %d updates, rejected %v", len(b.Updates), b.Rejected)
	}
	if b := r.batch(3, m); &b.Updates[0] != first {
		t.Fatal("a rejected record kept the free list's slice")
	}

	// The list holds at most freeUpdates updates' room.
	var f updateFree
	for range 2 * freeUpdates / len(ups) {
		f.put(make([]livegraph.Update, 0, len(ups)))
	}
	if f.held > freeUpdates {
		t.Fatalf("the free list holds room for %d updates, bound %d", f.held, freeUpdates)
	}
}
