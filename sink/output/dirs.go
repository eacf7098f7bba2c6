package output

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/store"
)

// BatchDirs lists the directories {prefix}/kind=*/graph=*/algorithm=*/batch={id}
// and, of the layout before kinds, {prefix}/graph=*/algorithm=*/batch={id}
// that may exist: one listing of the prefix, one per kind and graph, then
// a probe per algorithm directory.
func BatchDirs(ctx context.Context, b *blob.Bucket, prefix, batchID string, timeout time.Duration) ([]string, error) {
	algos, err := algorithmDirs(ctx, b, dirPrefix(prefix), timeout)
	if err != nil {
		return nil, err
	}
	return batchDirsUnder(algos, batchID), nil
}

// dirPrefix is prefix as the directory listings take it: "" or ending in
// "/".
func dirPrefix(prefix string) string {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	return prefix
}

// batchDirsUnder is the directory of batchID under each algorithm
// directory of algos.
func batchDirsUnder(algos []string, batchID string) []string {
	dirs := make([]string, len(algos))
	for i, a := range algos {
		dirs[i] = a + "batch=" + escape(batchID)
	}
	return dirs
}

// algorithmDirs lists the algorithm directories under prefix ("" or
// ending in "/"), each with its trailing slash: those under every kind's
// graphs, and those of the layout before kinds.
func algorithmDirs(ctx context.Context, b *blob.Bucket, prefix string, timeout time.Duration) ([]string, error) {
	top, err := listDirs(ctx, b, prefix, "", timeout)
	if err != nil {
		return nil, err
	}
	var graphs []string
	for _, d := range top {
		name := strings.TrimPrefix(d, prefix)
		switch {
		case strings.HasPrefix(name, kindDir):
			g, err := listDirs(ctx, b, d, "graph=", timeout)
			if err != nil {
				return nil, err
			}
			graphs = append(graphs, g...)
		case strings.HasPrefix(name, "graph="):
			graphs = append(graphs, d) // written before kinds had directories
		}
	}
	var dirs []string
	for _, g := range graphs {
		algos, err := listDirs(ctx, b, g, "algorithm=", timeout)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, algos...)
	}
	return dirs, nil
}

// DirCache keeps the algorithm directories that BatchDirs lists above the
// batch directories of one bucket, for up to a TTL, so that a stage that
// looks up every batch it takes in (sink.Lookup, sink.WithDirCache) lists
// the kind, graph and algorithm levels about once a TTL instead of once a
// batch. Against an S3 store those were three of the eight small requests
// each batch made beside its part: versitygw, which closes every
// connection after one response, spends about 200 µs of CPU on each (a
// new TCP connection, the signature, the listing), some 8% of its CPU for
// a 2.4 MB batch, on the cores a stage on the same host needs.
//
// The levels change only when a batch is the first under a new kind,
// graph or algorithm. A writer given the cache adds its own directory when
// it commits (Add), so this process's batches are found at once; a
// directory another process created within the TTL is missed for that
// long. What the miss costs: a redelivered batch written there is walked
// again, and its commit finds the manifest (create-if-absent) and reports
// it, as it does for two writers racing; and a batch id reused by a
// different request under another graph or algorithm is written beside
// it instead of refused as a conflict, which a Lookup just before that
// writer's commit would not have refused either. A DirCache is safe for
// concurrent use; the zero TTL caches nothing.
type DirCache struct {
	ttl time.Duration
	now func() time.Time // tests
	mu  sync.Mutex
	// entries are by prefix (as dirPrefix writes it).
	entries map[string]*dirEntry
}

// dirEntry is one prefix's listing, in flight until done is closed.
type dirEntry struct {
	done  chan struct{}
	at    time.Time
	algos []string
	err   error
}

// NewDirCache returns a cache whose listings are reused for ttl.
func NewDirCache(ttl time.Duration) *DirCache {
	return &DirCache{ttl: ttl, now: time.Now, entries: map[string]*dirEntry{}}
}

// BatchDirs is the package's BatchDirs, its algorithm directories from
// the cache where a listing of prefix is younger than the TTL; a nil
// cache lists every time. One listing runs at a time per prefix: callers
// that come while it runs wait for it.
func (c *DirCache) BatchDirs(ctx context.Context, b *blob.Bucket, prefix, batchID string, timeout time.Duration) ([]string, error) {
	if c == nil || c.ttl <= 0 {
		return BatchDirs(ctx, b, prefix, batchID, timeout)
	}
	prefix = dirPrefix(prefix)
	c.mu.Lock()
	e := c.entries[prefix]
	if e != nil {
		select {
		case <-e.done:
			if e.err != nil || c.now().Sub(e.at) >= c.ttl {
				e = nil
			}
		default: // a listing in flight
		}
	}
	mine := e == nil
	if mine {
		e = &dirEntry{done: make(chan struct{}), at: c.now()}
		c.entries[prefix] = e
	}
	c.mu.Unlock()
	if mine {
		algos, err := algorithmDirs(ctx, b, prefix, timeout)
		c.mu.Lock()
		e.algos, e.err = algos, err
		c.mu.Unlock()
		close(e.done)
	} else {
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c.mu.Lock()
	algos, err := slices.Clone(e.algos), e.err
	c.mu.Unlock()
	if err != nil {
		if !mine {
			// Another caller's listing failed, maybe only its context:
			// this caller's own answer is its own listing's.
			return BatchDirs(ctx, b, prefix, batchID, timeout)
		}
		return nil, err
	}
	return batchDirsUnder(algos, batchID), nil
}

// Add records the batch directory dir (Layout.Dir) as written: its
// algorithm directory joins every cached listing whose prefix holds it.
func (c *DirCache) Add(dir string) {
	if c == nil {
		return
	}
	i := strings.LastIndex(dir, "/")
	if i < 0 {
		return
	}
	algo := dir[:i+1]
	c.mu.Lock()
	defer c.mu.Unlock()
	for prefix, e := range c.entries {
		select {
		case <-e.done:
		default:
			// In flight: it may have listed before the directory
			// existed. Drop it; its callers still get its answer.
			delete(c.entries, prefix)
			continue
		}
		if e.err == nil && strings.HasPrefix(algo, prefix) && !slices.Contains(e.algos, algo) {
			e.algos = append(e.algos, algo)
		}
	}
}

// listDirs returns the "directories" directly under prefix whose names
// start with name, each with its trailing slash.
func listDirs(ctx context.Context, b *blob.Bucket, prefix, name string, timeout time.Duration) ([]string, error) {
	if root, ok := store.LocalRoot(b); ok {
		if dir, ok := localDirOf(root, prefix); ok {
			return listLocalDirs(dir, prefix, name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	it := b.List(&blob.ListOptions{Prefix: prefix + name, Delimiter: "/"})
	var out []string
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		if obj.IsDir {
			out = append(out, obj.Key)
		}
	}
}

// localDirOf is the directory of a key prefix ("" or ending in "/") in a
// local bucket.
func localDirOf(root, prefix string) (string, bool) {
	if prefix == "" {
		return root, true
	}
	return store.LocalPath(root, strings.TrimSuffix(prefix, "/"))
}

// readDir is os.ReadDir; tests count the directories a search reads.
var readDir = os.ReadDir

// listLocalDirs is listDirs for a local bucket: one read of the directory
// itself. gocloud's fileblob answers a delimited listing by walking every
// file under the prefix's parent directory, which for "graph=" and
// "algorithm=" is every earlier batch (76.8 ms a lookup on tmpfs with
// 20,000 batches, sink's BenchmarkLookupBigTree). A directory with no object
// under it, which fileblob would not list, costs the caller one probe
// that finds nothing.
func listLocalDirs(dir, prefix, name string) ([]string, error) {
	entries, err := readDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), name) {
			out = append(out, prefix+e.Name()+"/")
		}
	}
	return out, nil
}
