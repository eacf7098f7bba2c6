package output

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestDirCacheReusesListingForItsTTL: within the TTL a DirCache answers
// from its listing (no directory read), a directory made since is found
// once a writer Adds it or the TTL has passed, and a nil cache or a zero
// TTL lists every time.
func TestDirCacheReusesListingForItsTTL(t *testing.T) {
	b, _ := fileBucket(t)
	writeComplete(t, b, "g", "a")
	reads := 0
	readDir = func(dir string) ([]os.DirEntry, error) {
		reads++
		return os.ReadDir(dir)
	}
	t.Cleanup(func() { readDir = os.ReadDir })
	now := time.Unix(1000, 0)
	c := NewDirCache(time.Second)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	dirs := func(c *DirCache, batch string) string {
		t.Helper()
		d, err := c.BatchDirs(ctx, b, "walks", batch, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(d)
	}
	const g = "[walks/kind=walks/graph=g/algorithm=deepwalk/batch=x]"
	const gh = "[walks/kind=walks/graph=g/algorithm=deepwalk/batch=x walks/kind=walks/graph=h/algorithm=deepwalk/batch=x]"
	if got := dirs(c, "x"); got != g || reads != 3 {
		t.Fatalf("first lookup: %s after %d reads; want %s after 3", got, reads, g)
	}
	writeComplete(t, b, "h", "b") // made elsewhere, after the listing
	if got := dirs(c, "x"); got != g || reads != 3 {
		t.Fatalf("within the TTL: %s after %d reads; want the listing's %s, no read", got, reads, g)
	}
	l, err := BatchLayout("walks", KindWalks, "h", "deepwalk", "b")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(l.Dir)
	c.Add(l.Dir) // once only
	if got := dirs(c, "x"); got != gh || reads != 3 {
		t.Fatalf("after Add: %s after %d reads; want %s, no read", got, reads, gh)
	}
	now = now.Add(time.Second)
	if got := dirs(c, "x"); got != gh || reads != 7 {
		t.Fatalf("after the TTL: %s after %d reads; want %s after 7", got, reads, gh)
	}
	for _, c := range []*DirCache{nil, NewDirCache(0)} {
		before := reads
		dirs(c, "x")
		dirs(c, "x")
		if reads-before != 8 {
			t.Errorf("%v: %d reads for two lookups; want 8", c, reads-before)
		}
	}
}

// TestDirCacheConcurrentLookups: lookups and Adds from many goroutines at
// once (run with -race) share one listing and all see the directories
// listed or added before them.
func TestDirCacheConcurrentLookups(t *testing.T) {
	b, _ := fileBucket(t)
	writeComplete(t, b, "g", "a")
	c := NewDirCache(time.Hour)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 32 {
		wg.Go(func() {
			l, err := BatchLayout("walks", KindWalks, fmt.Sprintf("h%d", i), "deepwalk", "b")
			if err != nil {
				errs <- err
				return
			}
			c.Add(l.Dir)
			d, err := c.BatchDirs(ctx, b, "walks", "x", time.Minute)
			if err != nil {
				errs <- err
				return
			}
			if !slices.Contains(d, "walks/kind=walks/graph=g/algorithm=deepwalk/batch=x") {
				errs <- fmt.Errorf("lookup %d: %v lacks graph g's directory", i, d)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
