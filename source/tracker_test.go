package source

import "testing"

func TestTrackerCommitsInOrder(t *testing.T) {
	tr := newTracker()
	for o := int64(3); o <= 6; o++ {
		tr.fetched("t", 0, o, 0)
	}
	if _, ok := tr.ack("t", 0, 5, 0); ok {
		t.Fatal("committed 5 while 3 and 4 are outstanding")
	}
	if off, ok := tr.ack("t", 0, 3, 0); !ok || off != 3 {
		t.Fatalf("ack 3: %d %v", off, ok)
	}
	tr.committed("t", 0, 3, 0)
	if off, ok := tr.ack("t", 0, 4, 0); !ok || off != 5 {
		t.Fatalf("ack 4 should commit through 5: %d %v", off, ok)
	}
	tr.committed("t", 0, 5, 0)
	// A redelivery of an old offset after a rebalance never moves the commit back.
	tr.fetched("t", 0, 2, 0)
	if _, ok := tr.ack("t", 0, 2, 0); ok {
		t.Fatal("committed an offset below the watermark")
	}
	if off, ok := tr.ack("t", 0, 6, 0); !ok || off != 6 {
		t.Fatalf("ack 6: %d %v", off, ok)
	}
	// A failed commit is retried by the next acknowledgement.
	tr.fetched("t", 1, 0, 0)
	tr.fetched("t", 1, 1, 0)
	if off, ok := tr.ack("t", 1, 0, 0); !ok || off != 0 {
		t.Fatal("partition 1 offset 0")
	}
	if off, ok := tr.ack("t", 1, 1, 0); !ok || off != 1 {
		t.Fatalf("after a failed commit of 0, ack 1 should commit through 1: %d %v", off, ok)
	}
	if tr.pending() != 0 {
		t.Fatalf("pending %d", tr.pending())
	}
}

// TestTrackerResetStartsANewEpoch: after a partition's log is replaced, an
// acknowledgement of a record of the old log commits nothing, and the new
// log commits from its first offset although the old log's commit point was
// far above it.
func TestTrackerResetStartsANewEpoch(t *testing.T) {
	tr := newTracker()
	for o := int64(0); o < 12; o++ {
		tr.fetched("t", 0, o, 0)
	}
	for o := int64(0); o < 10; o++ {
		if off, ok := tr.ack("t", 0, o, 0); ok {
			tr.committed("t", 0, off, 0)
		}
	}
	if got := tr.lastCommitted("t", 0); got != 9 {
		t.Fatalf("old log committed through %d", got)
	}
	tr.reset("t", 0, 0)
	epoch := tr.epoch("t", 0)
	if epoch == 0 {
		t.Fatal("reset kept the epoch")
	}
	if tr.fetched("t", 0, 10, 0) {
		t.Fatal("a record fetched from the old log was taken")
	}
	if _, ok := tr.ack("t", 0, 11, 0); ok {
		t.Fatal("an acknowledgement of the old log would commit into the new one")
	}
	if tr.pending() != 0 {
		t.Fatalf("the old log's records still count as pending: %d", tr.pending())
	}
	tr.fetched("t", 0, 0, epoch)
	tr.fetched("t", 0, 1, epoch)
	if off, ok := tr.ack("t", 0, 0, epoch); !ok || off != 0 {
		t.Fatalf("new log, offset 0: %d %v", off, ok)
	}
	tr.committed("t", 0, 0, epoch)
	if off, ok := tr.ack("t", 0, 1, epoch); !ok || off != 1 {
		t.Fatalf("new log, offset 1: %d %v", off, ok)
	}
}
