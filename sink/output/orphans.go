package output

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/walkstage/walkstage/store"
)

// Orphans: parts in the output tree that no manifest lists. A killed
// attempt, a lost acknowledgement or a failed post-commit removal
// (deleteUnlisted is best effort) leaves them, and a glob over
// {prefix}/kind={kind}/ reads them as if they were committed rows.
// ListCommitted reads the tree through its manifests instead; TidyOrphans
// deletes the orphans once no live writer can still be making them part of
// a batch.

// TidyStats counts what TidyOrphans looked at, removed and left.
type TidyStats struct {
	// Dirs is the number of batch directories holding parts that were
	// looked at.
	Dirs int
	// UnlistedRemoved counts parts removed from a batch directory whose
	// manifest is complete and does not list them: attempts that lost, or
	// a winner's removal that failed.
	UnlistedRemoved int
	// AbandonedRemoved counts parts removed from a batch directory without
	// a manifest: attempts killed, or given up, before any commit.
	AbandonedRemoved int
	// BytesRemoved is the size of the removed parts.
	BytesRemoved int64
	// YoungKept counts parts that would have been removed but are younger
	// than the age: maybe a live writer's; a later tidy takes them.
	YoungKept int
	// DirsLeft counts batch directories left alone because their manifest
	// does not decode (a newer version's, or damaged) or lists a part that
	// is missing or of another size: what belongs to the batch is not
	// known there, and the batch's next write replaces that manifest.
	DirsLeft int
}

// Removed is the number of parts removed.
func (s TidyStats) Removed() int { return s.UnlistedRemoved + s.AbandonedRemoved }

// TidyOrphans removes, under prefix, the parts that no manifest lists and
// that were last modified more than olderThan ago:
//
//   - in a batch directory whose `_SUCCESS` is complete (every part it
//     lists present with the listed size), the parts it does not list;
//   - in a batch directory without `_SUCCESS`, every part.
//
// It never removes a part a manifest lists, a manifest, or anything that
// is not a part ("part-*.parquet"), and it leaves a directory alone when
// its manifest does not decode or is incomplete (TidyStats.DirsLeft).
//
// olderThan must exceed the longest attempt at a batch, from its first
// part to its manifest, with a margin for clock skew between this host and
// the store (ages are the store's modification times against this host's
// clock): a writer on another replica may still make a younger part part
// of its batch, and a part removed under it leaves a manifest that lists a
// missing part. 0 is right only when no writer runs (every stage stopped).
//
// Batch directories are found in both layouts sink.Lookup searches:
// {prefix}/kind={kind}/graph=*/algorithm=*/batch=* for walks, visits and
// samples, and {prefix}/graph=*/algorithm=*/batch=* of the versions before
// kinds had directories (whose orphans a glob over graph=*/ reads the
// same way). A kind= directory of a kind this version does not know (a
// newer version's) is left alone.
//
// Listing goes through the bucket on S3 and other stores, page by page;
// for a file:// bucket opened by store.OpenBucket it reads the local directory
// (as store.Sweep does; the staging directory is skipped). TidyOrphans stops at
// the first store failure and returns what it removed so far with the
// error; running it again resumes. Of opts only store.WithCallTimeout
// applies, to each store call (a listing page, a manifest read, a delete).
func TidyOrphans(ctx context.Context, bucket *blob.Bucket, prefix string, olderThan time.Duration, opts ...store.Option) (TidyStats, error) {
	var st TidyStats
	timeout, err := store.CallTimeout(opts...)
	if err != nil {
		return st, err
	}
	if olderThan < 0 {
		return st, fmt.Errorf("sink: tidy orphans: age %v is negative", olderThan)
	}
	keyPrefix, err := treePrefix(prefix)
	if err != nil {
		return st, fmt.Errorf("sink: tidy orphans: %w", err)
	}
	cutoff := time.Now().Add(-olderThan)
	t := &tidier{bucket: bucket, timeout: timeout, cutoff: cutoff, st: &st}
	root, local := store.LocalRoot(bucket)
	t.root, t.local = root, local
	err = scanBatchDirs(ctx, bucket, keyPrefix, []string{kindDir, "graph="}, timeout, t.dir)
	if err != nil {
		return st, fmt.Errorf("sink: tidy orphans under %q: %w", keyPrefix, err)
	}
	return st, nil
}

// tidier is one TidyOrphans run.
type tidier struct {
	bucket  *blob.Bucket
	timeout time.Duration
	cutoff  time.Time
	root    string // a local bucket's directory
	local   bool
	st      *TidyStats
}

// dir tidies one batch directory, from the objects the listing found in it.
// The listing comes first and the manifest is read after: a part listed by
// a manifest written in between is younger than any live attempt's start
// only if that attempt is, which is what the age guards.
func (t *tidier) dir(ctx context.Context, d batchDir, objs []listedObject) error {
	var parts []listedObject
	for _, o := range objs {
		if isPartName(o.name) {
			parts = append(parts, o)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	t.st.Dirs++
	m, err := readManifestTimeout(ctx, t.bucket, d.dir+"/"+SuccessName, t.timeout)
	switch {
	case errors.Is(err, ErrNoManifest):
		m = nil
	case errors.Is(err, ErrCorrupt):
		t.st.DirsLeft++
		return nil
	case err != nil:
		return err
	}
	listed := map[string]bool{}
	if m != nil {
		complete, err := presentIn(ctx, t.bucket, m, objs, t.timeout)
		if err != nil {
			return err
		}
		if !complete {
			t.st.DirsLeft++
			return nil
		}
		for _, f := range m.Files {
			listed[f.Key] = true
		}
	}
	for _, p := range parts {
		if listed[p.key] {
			continue
		}
		if !p.mod.Before(t.cutoff) {
			t.st.YoungKept++
			continue
		}
		if err := t.remove(ctx, p.key); err != nil {
			return fmt.Errorf("remove %s: %w", p.key, err)
		}
		if m != nil {
			t.st.UnlistedRemoved++
		} else {
			t.st.AbandonedRemoved++
		}
		t.st.BytesRemoved += p.size
	}
	return nil
}

func (t *tidier) remove(ctx context.Context, key string) error {
	if t.local {
		p, ok := store.LocalPath(t.root, key)
		if !ok {
			return fmt.Errorf("key %q is not a local path", key)
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	if err := t.bucket.Delete(cctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	return nil
}

// presentIn is PartsPresent that takes sizes from the directory's listing
// and asks the store only for listed parts the listing did not show.
func presentIn(ctx context.Context, b *blob.Bucket, m *Manifest, objs []listedObject, timeout time.Duration) (bool, error) {
	sizes := make(map[string]int64, len(objs))
	for _, o := range objs {
		sizes[o.key] = o.size
	}
	var unseen Manifest
	for _, f := range m.Files {
		size, ok := sizes[f.Key]
		switch {
		case !ok:
			unseen.Files = append(unseen.Files, f)
		case size != f.Bytes:
			return false, nil
		}
	}
	return PartsPresent(ctx, b, &unseen, timeout)
}

// CommittedOutput is what ListCommitted found.
type CommittedOutput struct {
	// Batches are the complete manifests (every part listed present with
	// its listed size), in key order of their `_SUCCESS`; each one's
	// Layout is where it was found.
	Batches []*Manifest
	// LeftOut are the keys of manifests of the kind that were not taken:
	// they do not decode, or list a part that is missing or of another
	// size. Their batches are not committed output; the stage rewrites
	// such a batch when its request comes again.
	LeftOut []string
}

// Parts returns the keys of every committed part, batch by batch, each
// batch's in walk-id (row) order.
func (c CommittedOutput) Parts() []string {
	var keys []string
	for _, m := range c.Batches {
		for _, f := range m.Files {
			keys = append(keys, f.Key)
		}
	}
	return keys
}

// ListCommitted returns the committed batches of one output kind
// (KindWalks, KindVisits or KindSamples) under prefix, read through their
// manifests: exactly the rows a reader should see, whatever orphans the
// tree holds (see TidyOrphans). With a batch id, only that batch's
// outputs. Batches of the layout before kinds had directories are
// included when their manifest is of the kind. Of opts only
// store.WithCallTimeout applies, to each store call.
func ListCommitted(ctx context.Context, bucket *blob.Bucket, prefix, kind, batchID string, opts ...store.Option) (CommittedOutput, error) {
	var out CommittedOutput
	timeout, err := store.CallTimeout(opts...)
	if err != nil {
		return out, err
	}
	id := batchID
	if id == "" {
		id = "x"
	}
	if _, err := BatchLayout(prefix, kind, "g", "a", id); err != nil {
		return out, fmt.Errorf("sink: list committed %s: %w", kind, err)
	}
	keyPrefix, err := treePrefix(prefix)
	if err != nil {
		return out, fmt.Errorf("sink: list committed %s: %w", kind, err)
	}
	take := func(ctx context.Context, key string, objs []listedObject) error {
		m, err := readManifestTimeout(ctx, bucket, key, timeout)
		switch {
		case errors.Is(err, ErrNoManifest):
			return nil // deleted since the listing
		case errors.Is(err, ErrCorrupt):
			out.LeftOut = append(out.LeftOut, key)
			return nil
		case err != nil:
			return err
		}
		if m.Kind() != kind {
			return nil
		}
		complete, err := presentIn(ctx, bucket, m, objs, timeout)
		if err != nil {
			return err
		}
		if !complete {
			out.LeftOut = append(out.LeftOut, key)
			return nil
		}
		out.Batches = append(out.Batches, m)
		return nil
	}
	if batchID != "" {
		dirs, err := BatchDirs(ctx, bucket, prefix, batchID, timeout)
		if err != nil {
			return out, fmt.Errorf("sink: list committed %s batch %s: %w", kind, batchID, err)
		}
		for _, d := range dirs {
			bd, ok := splitBatchKey(keyPrefix, d+"/"+SuccessName)
			if !ok || (bd.kind != "" && bd.kind != kind) {
				continue
			}
			if err := take(ctx, d+"/"+SuccessName, nil); err != nil {
				return out, fmt.Errorf("sink: list committed %s batch %s: %w", kind, batchID, err)
			}
		}
	} else {
		err := scanBatchDirs(ctx, bucket, keyPrefix, []string{kindDir + kind + "/", "graph="}, timeout,
			func(ctx context.Context, d batchDir, objs []listedObject) error {
				if !slices.ContainsFunc(objs, func(o listedObject) bool { return o.name == SuccessName }) {
					return nil
				}
				return take(ctx, d.dir+"/"+SuccessName, objs)
			})
		if err != nil {
			return out, fmt.Errorf("sink: list committed %s under %q: %w", kind, keyPrefix, err)
		}
	}
	key := func(m *Manifest) string { return m.dir }
	slices.SortFunc(out.Batches, func(a, b *Manifest) int { return strings.Compare(key(a), key(b)) })
	out.Batches = slices.CompactFunc(out.Batches, func(a, b *Manifest) bool { return key(a) == key(b) })
	slices.Sort(out.LeftOut)
	out.LeftOut = slices.Compact(out.LeftOut)
	return out, nil
}

// treePrefix checks prefix as BatchLayout does and returns it as a key
// prefix: "" or ending in "/".
func treePrefix(prefix string) (string, error) {
	if _, err := BatchLayout(prefix, KindWalks, "g", "a", "b"); err != nil {
		return "", err
	}
	prefix = strings.Trim(prefix, "/")
	if prefix == "" {
		return "", nil
	}
	return prefix + "/", nil
}

// isPartName says whether an object's name inside a batch directory is a
// part, of any attempt or of the naming before attempts.
func isPartName(name string) bool {
	return strings.HasPrefix(name, "part-") && strings.HasSuffix(name, ".parquet")
}

// batchDir is a batch directory found in a listing.
type batchDir struct {
	dir  string // key, without a trailing slash
	kind string // "" in the layout before kinds
}

// listedObject is an object a listing found.
type listedObject struct {
	key, name string // name: inside its batch directory
	mod       time.Time
	size      int64
}

// splitBatchKey splits a key under keyPrefix into its batch directory,
// for keys directly inside one:
// {keyPrefix}kind={kind}/graph=G/algorithm=A/batch=B/NAME with a known
// kind, or {keyPrefix}graph=G/algorithm=A/batch=B/NAME (before kinds).
func splitBatchKey(keyPrefix, key string) (batchDir, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return batchDir{}, false
	}
	segs := strings.Split(rest, "/")
	var kind string
	if len(segs) == 5 {
		k, ok := strings.CutPrefix(segs[0], kindDir)
		if !ok {
			return batchDir{}, false
		}
		switch k {
		case KindWalks, KindVisits, KindSamples:
		default:
			return batchDir{}, false
		}
		kind, segs = k, segs[1:]
	}
	if len(segs) != 4 || !strings.HasPrefix(segs[0], "graph=") || !strings.HasPrefix(segs[1], "algorithm=") ||
		!strings.HasPrefix(segs[2], "batch=") || segs[3] == "" {
		return batchDir{}, false
	}
	return batchDir{dir: strings.TrimSuffix(key, "/"+segs[3]), kind: kind}, true
}

// listPageSize is how many keys a listing page asks for (S3's most).
const listPageSize = 1000

// scanBatchDirs lists every object under keyPrefix+start for each start,
// and hands fn each batch directory's objects. Listings come in key order,
// so a directory's objects arrive together; were they split, fn sees the
// directory once per run of its objects (the callers read its manifest
// from the store, not from the listing, and only ever remove by age, so a
// split is harmless). On S3 each page is a call of its own under timeout;
// a local bucket's directory is read directly.
func scanBatchDirs(ctx context.Context, b *blob.Bucket, keyPrefix string, starts []string, timeout time.Duration,
	fn func(ctx context.Context, d batchDir, objs []listedObject) error) error {
	var (
		cur  batchDir
		objs []listedObject
	)
	flush := func() error {
		if len(objs) == 0 {
			return nil
		}
		err := fn(ctx, cur, objs)
		objs = objs[:0]
		return err
	}
	visit := func(key string, mod time.Time, size int64) error {
		d, ok := splitBatchKey(keyPrefix, key)
		if !ok {
			return nil
		}
		if d != cur {
			if err := flush(); err != nil {
				return err
			}
			cur = d
		}
		objs = append(objs, listedObject{key: key, name: path.Base(key), mod: mod, size: size})
		return nil
	}
	for _, start := range starts {
		var err error
		if root, ok := store.LocalRoot(b); ok {
			err = walkLocal(ctx, root, keyPrefix, start, visit)
		} else {
			err = listBlob(ctx, b, keyPrefix+start, timeout, visit)
		}
		if err != nil {
			return err
		}
		if err := flush(); err != nil {
			return err
		}
	}
	return nil
}

// listBlob lists every object under prefix, page by page.
func listBlob(ctx context.Context, b *blob.Bucket, prefix string, timeout time.Duration, visit func(string, time.Time, int64) error) error {
	token := blob.FirstPageToken
	for {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		page, next, err := b.ListPage(cctx, token, listPageSize, &blob.ListOptions{Prefix: prefix})
		cancel()
		if err != nil {
			return fmt.Errorf("list %s: %w", prefix, err)
		}
		for _, o := range page {
			if o.IsDir {
				continue
			}
			if err := visit(o.Key, o.ModTime, o.Size); err != nil {
				return err
			}
		}
		if len(next) == 0 {
			return nil
		}
		token = next
	}
}

// walkLocal is listBlob for a local bucket: the files under
// {root}/{keyPrefix}, in key order, whose keys start with keyPrefix+start,
// and nothing of the staging directory. start is a name prefix of the
// first level ("kind=", "kind=walks/", "graph=").
func walkLocal(ctx context.Context, root, keyPrefix, start string, visit func(string, time.Time, int64) error) error {
	base := root
	if keyPrefix != "" {
		var ok bool
		if base, ok = store.LocalPath(root, strings.TrimSuffix(keyPrefix, "/")); !ok {
			return fmt.Errorf("prefix %q is not a local path", keyPrefix)
		}
	}
	want := keyPrefix + start
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, err := filepath.Rel(base, p)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		key := keyPrefix + filepath.ToSlash(rel)
		if d.IsDir() {
			// Descend only where keys under want can be: into want's own
			// directories, and below them.
			if d.Name() == store.TempDirName || !(strings.HasPrefix(key+"/", want) || strings.HasPrefix(want, key+"/")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(key, want) {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since the directory was read
		}
		if err != nil {
			return err
		}
		return visit(key, info.ModTime(), info.Size())
	})
	if err != nil {
		return fmt.Errorf("walk %s: %w", base, err)
	}
	return nil
}
