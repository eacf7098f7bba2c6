package sink

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/store"
)

// Tidier takes the removal of what other attempts left under a committed
// batch off the commit's common path, for the lookups and writers of one
// bucket and prefix in one process (WithTidier). Without one, every commit
// lists the batch directory's parts and the multipart uploads under it:
// two of the four small requests a batch made beside its part. With one:
//
//   - the lookup lists the batch directory instead of reading its manifest
//     (one request either way), and a commit lists the directory's parts
//     again only when that listing was not empty, when an attempt at the
//     batch in this process ended without a manifest since, when the
//     manifest has no fingerprint (last-writer-wins, see Commit), or when
//     no lookup of this process listed the directory (a directory the
//     lookups' DirCache did not know yet). A lookup that finds a complete
//     manifest with a fingerprint deletes the parts the listing shows and
//     the manifest does not list. Parts another attempt writes between a
//     lookup and the commit are that attempt's to delete: a live loser
//     deletes its own (Commit), and a killed one's batch is redelivered,
//     and its lookup finds this manifest beside them.
//   - a commit lists the multipart uploads under its directory only when
//     one of its own parts was larger than store.PutThreshold (sent as a
//     multipart upload) or an attempt of this process failed there: parts
//     are byte-identical for the same walks and settings, so an earlier
//     attempt with the same settings sent every part as one PUT as well,
//     and a killed PUT leaves no upload. Every other committed directory
//     waits for Sweep, which aborts every upload under such directories,
//     whatever its age, and every upload under the prefix older than the
//     Tidier's sweep age, with one listing for all of them.
//
// Run sweeps once an interval while commits wait for it, and once more
// when its context ends. A Tidier is safe for concurrent use. On local
// (file://) buckets it does nothing: writers and lookups there behave as
// without one.
type Tidier struct {
	bucket      *blob.Bucket
	prefix      string // key prefix of the uploads listing: "" or ending in "/"
	local       bool
	callTimeout time.Duration
	sweepAge    time.Duration    // 0: no upload is aborted for its age alone
	now         func() time.Time // tests

	mu sync.Mutex
	// seen is what this process knows of batch directories it may write:
	// listed empty by a lookup, or dirty (something was there, or an
	// attempt here failed). At most maxTidierDirs; an entry older than
	// seenTTL is forgotten (the commit then lists, as without it).
	seen map[string]dirSeen
	// committed are the batch directories committed (or found committed)
	// whose uploads wait for the next sweep.
	committed map[string]time.Time
	lastAge   time.Time // the last sweep, which also aborted old uploads
}

// dirSeen is what a Tidier knows of one batch directory.
type dirSeen struct {
	empty bool // a lookup listed it and found nothing
	at    time.Time
}

// maxTidierDirs bounds the directories a Tidier remembers: the lookups
// list every algorithm directory's copy of a batch, and a batch answered
// or refused never commits. Past it a lookup's finding is dropped, and a
// commit lists as without a Tidier.
const maxTidierDirs = 1 << 16

// seenTTL is how long a lookup's finding stands for the commit: longer
// than a batch waits between its lookup and its commit, short enough to
// bound the map by the lookups of that span.
const seenTTL = DefaultStaleAfter

// DefaultTidyInterval is how often Tidier.Run sweeps the uploads of the
// batches committed meanwhile.
const DefaultTidyInterval = time.Second

// NewTidier returns a Tidier for bucket under prefix. Its sweeps also
// abort every upload under the prefix initiated more than sweepAge ago
// (0: none for its age alone), taken for a killed writer's: it must exceed
// the longest part upload, as every replica sweeps the shared prefix. Of
// opts only WithCallTimeout applies, to each store call.
func NewTidier(bucket *blob.Bucket, prefix string, sweepAge time.Duration, opts ...Option) (*Tidier, error) {
	cfg, err := lookupConfig(opts)
	if err != nil {
		return nil, err
	}
	if sweepAge < 0 {
		return nil, fmt.Errorf("sink: sweep age %v is negative", sweepAge)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	_, local := store.LocalRoot(bucket)
	return &Tidier{bucket: bucket, prefix: prefix, local: local, callTimeout: cfg.callTimeout, sweepAge: sweepAge,
		now: time.Now, seen: map[string]dirSeen{}, committed: map[string]time.Time{}, lastAge: time.Now()}, nil
}

// active says whether t changes anything: not nil, not on a local bucket.
func (t *Tidier) active() bool { return t != nil && !t.local }

// observed records what a lookup's listing found in dir.
func (t *Tidier) observed(dir string, empty bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if old, ok := t.seen[dir]; ok && !old.empty && empty {
		return // an attempt here failed since: it stays dirty until a commit lists
	}
	if _, ok := t.seen[dir]; !ok && len(t.seen) >= maxTidierDirs {
		return
	}
	t.seen[dir] = dirSeen{empty: empty, at: t.now()}
}

// failed records that an attempt at dir ended without a manifest of its
// own: what it left (kept parts, parts whose cut upload landed late) is for
// the next commit there to list.
func (t *Tidier) failed(dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seen[dir] = dirSeen{at: t.now()}
}

// take says, for a commit that stands in dir, whether a lookup listed dir
// empty with no failed attempt since (clean), and whether an attempt here
// failed or the lookup found something (dirty); both false: unknown. It
// forgets dir.
func (t *Tidier) take(dir string) (clean, dirty bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.seen[dir]
	delete(t.seen, dir)
	if !ok || t.now().Sub(s.at) >= seenTTL {
		return false, false
	}
	return s.empty, !s.empty
}

// commit queues dir, whose manifest stands, for the next sweep.
func (t *Tidier) commit(dir string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.committed[dir] = t.now()
}

// Pending is how many committed batch directories wait for a sweep.
func (t *Tidier) Pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.committed)
}

// Sweep lists the multipart uploads under the prefix once and aborts those
// under the batch directories committed since the last sweep (any upload
// there lost: the manifest lists parts that are complete objects) and
// those initiated more than the sweep age ago (a killed writer's: no live
// part upload lasts that long). It says how many it aborted. Directories
// whose listing failed wait for the next sweep.
func (t *Tidier) Sweep(ctx context.Context) (int, error) {
	if !t.active() {
		return 0, nil
	}
	t.mu.Lock()
	dirs := make(map[string]bool, len(t.committed))
	for d := range t.committed {
		dirs[d] = true
	}
	now := t.now()
	for d, s := range t.seen {
		if now.Sub(s.at) >= seenTTL {
			delete(t.seen, d)
		}
	}
	t.mu.Unlock()
	cutoff := now.Add(-t.sweepAge)
	n, err := store.AbortUploadsWhere(ctx, t.bucket, t.prefix, t.callTimeout, func(key string, initiated time.Time) bool {
		i := strings.LastIndex(key, "/")
		return i >= 0 && dirs[key[:i]] || t.sweepAge > 0 && initiated.Before(cutoff)
	})
	if err != nil {
		return n, fmt.Errorf("sink: sweep multipart uploads under %q: %w", t.prefix, err)
	}
	t.mu.Lock()
	for d := range dirs {
		delete(t.committed, d)
	}
	t.lastAge = now
	t.mu.Unlock()
	return n, nil
}

// Run sweeps every interval while committed directories wait for it (and
// at least once every sweep age, for uploads killed writers left),
// and once more when ctx ends, within one call timeout. Failures go
// to report (nil: dropped) and are retried at the next interval.
func (t *Tidier) Run(ctx context.Context, interval time.Duration, report func(aborted int, err error)) {
	if !t.active() {
		return
	}
	if interval <= 0 {
		interval = DefaultTidyInterval
	}
	sweep := func(ctx context.Context) {
		n, err := t.Sweep(ctx)
		if report != nil && (n > 0 || err != nil) {
			report(n, err)
		}
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if t.Pending() > 0 {
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), t.callTimeout)
				sweep(fctx)
				cancel()
			}
			return
		case <-tick.C:
			t.mu.Lock()
			due := len(t.committed) > 0 || t.sweepAge > 0 && t.now().Sub(t.lastAge) >= t.sweepAge
			t.mu.Unlock()
			if due {
				sweep(ctx)
			}
		}
	}
}
