package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// errUnsure marks a publish failure after which the manifest may or may not
// be ours (a put that timed out may still have landed): the parts are then
// kept, since a manifest may list them.
var errUnsure = errors.New("manifest write outcome unknown")

// manifestCreateTries and manifestCreatePause pace the create-if-absent
// puts of one commit that the store refuses while no manifest can be read:
// the pauses grow by manifestCreatePause up to manifestCreatePauseMax. The
// refusal is waited out for manifestCreateTries tries (0.9 s) and at least
// the call timeout before the key counts as a phantom (see publish).
const (
	manifestCreateTries    = 10
	manifestCreatePause    = 20 * time.Millisecond
	manifestCreatePauseMax = 200 * time.Millisecond
)

// publish writes m as the batch's manifest (see Commit for the rules) and
// returns the manifest that now describes the batch.
func (w *BatchWriter) publish(ctx context.Context, m *output.Manifest) (*output.Manifest, error) {
	data, err := m.Encode()
	if err != nil {
		return nil, err
	}
	key := w.layout.SuccessKey()
	var (
		cur      *output.Manifest
		complete bool
		rerr     error
		refused  time.Time // the first refusal that no readable manifest explained
		deleted  bool      // the phantom recovery's DELETE was sent
	)
	for try := 1; ; try++ {
		err = w.putManifest(ctx, data, true)
		if err == nil {
			return w.won(ctx, m, m.Fingerprint == ""), nil
		}
		if !store.IsExists(err) {
			if err := w.unsure(ctx, m, true, fmt.Errorf("sink: batch %s: write %s: %w", w.meta.BatchID, key, err)); err != nil {
				return nil, err
			}
			return w.won(ctx, m, m.Fingerprint == ""), nil
		}
		// A manifest is there: ours, if a create of ours landed and only
		// its answer was lost (the SDK's retry is then refused by it), or
		// another writer's, which decides.
		cur, complete, rerr = output.ReadComplete(ctx, w.bucket, key, w.cfg.callTimeout)
		if rerr != nil || cur != nil {
			break
		}
		// The store refused our create, yet no manifest can be read: the
		// other writer's put is still landing (versitygw stores a put's
		// metadata, which its create check reads, before it links the
		// data, which reads find), or its manifest was deleted since.
		// Neither allows the replace below: a replace would race that
		// writer's create, each deleting the other's parts. Create-if-absent
		// again, for at least the call timeout, the longest a live writer's
		// put takes. A refusal that lasts longer is a phantom: a store
		// killed while landing a put (its own or another writer's) keeps
		// the metadata without the data, and refuses every create for good.
		if refused.IsZero() {
			refused = time.Now()
		}
		if try < manifestCreateTries || time.Since(refused) < w.cfg.callTimeout {
			if err := ctxsleep.Sleep(ctx, min(time.Duration(try)*manifestCreatePause, manifestCreatePauseMax)); err != nil {
				return nil, w.keep(fmt.Errorf("sink: batch %s: wait for the manifest another writer is writing: %w", w.meta.BatchID, err))
			}
			continue
		}
		if !deleted {
			// First recovery step: a DELETE, then a create again. A
			// store whose delete clears what refuses the create is
			// unwedged by it; versitygw's delete of a missing object
			// returns early and changes nothing.
			deleted = true
			if err := w.deleteKey(ctx, key); err != nil {
				return nil, w.keep(fmt.Errorf("sink: batch %s: delete %s, which refuses creates but cannot be read: %w", w.meta.BatchID, key, err))
			}
			continue
		}
		return w.overwritePhantom(ctx, m, data, time.Since(refused))
	}
	if cur != nil && ours(cur, m) {
		// Our create landed; its acknowledgement was lost. Never delete
		// the parts it lists.
		return w.won(ctx, m, m.Fingerprint == ""), nil
	}
	switch {
	case rerr != nil && !errors.Is(rerr, output.ErrCorrupt):
		// A manifest is there, maybe ours: keep the parts it may list.
		return nil, w.keep(fmt.Errorf("sink: batch %s: read the manifest that refused our create: %w", w.meta.BatchID, rerr))
	case cur != nil && complete && cur.Fingerprint != "":
		w.deleteOwnParts(ctx)
		w.abortOtherUploads(ctx)
		if cur.Fingerprint != m.Fingerprint {
			return nil, conflictError(w.meta.BatchID, cur.Fingerprint, m.Fingerprint)
		}
		return cur, nil
	}
	// Legacy, incomplete or unreadable: replace it. S3 and a local rename
	// swap the object atomically, so readers see the old manifest or ours.
	// First make sure our parts are still there: a writer that replaced
	// the manifest while we were paused deletes older parts, ours included,
	// and a manifest listing them would point at nothing.
	ok, err := output.PartsPresent(ctx, w.bucket, m, w.cfg.callTimeout)
	if err != nil {
		return nil, fmt.Errorf("sink: batch %s: check own parts: %w", w.meta.BatchID, err)
	}
	if !ok {
		return nil, fmt.Errorf("sink: batch %s: parts of this attempt were deleted by a later writer of the batch; its output stands", w.meta.BatchID)
	}
	if err := w.putManifest(ctx, data, false); err != nil {
		if err := w.unsure(ctx, m, false, fmt.Errorf("sink: batch %s: replace %s: %w", w.meta.BatchID, key, err)); err != nil {
			return nil, err
		}
		w.deleteUnlisted(ctx, m, true)
		return m, nil
	}
	w.deleteUnlisted(ctx, m, true)
	return m, nil
}

// overwritePhantom is the recovery's last step for a manifest key that has
// refused creates without being readable for longer than any live put
// takes, a DELETE included (see publish): a plain put of ours, which is
// what clears versitygw's phantom, read back. Ours read back is the
// batch's manifest, tidied as after a replace. Another writer's read back
// (one that recovered the same key at the same moment, and put last)
// decides as at a refused create. Still unreadable, the key cannot be
// resolved: an error wrapping ErrManifestUnresolvable, parts kept (the put
// may land yet).
func (w *BatchWriter) overwritePhantom(ctx context.Context, m *output.Manifest, data []byte, lasted time.Duration) (*output.Manifest, error) {
	key := w.layout.SuccessKey()
	unresolvable := func(what string, err error) error {
		return w.keep(fmt.Errorf("sink: batch %s: %w: %s refused creates for %v and a delete did not clear it; %s: %w",
			w.meta.BatchID, ErrManifestUnresolvable, key, lasted.Round(time.Millisecond), what, err))
	}
	ok, err := output.PartsPresent(ctx, w.bucket, m, w.cfg.callTimeout)
	if err != nil {
		return nil, w.keep(fmt.Errorf("sink: batch %s: check own parts: %w", w.meta.BatchID, err))
	}
	if !ok {
		return nil, fmt.Errorf("sink: batch %s: parts of this attempt were deleted by another writer of the batch while its manifest could not be read", w.meta.BatchID)
	}
	if err := w.putManifest(ctx, data, false); err != nil {
		return nil, unresolvable("overwrite", err)
	}
	cur, complete, err := output.ReadComplete(ctx, w.bucket, key, w.cfg.callTimeout)
	switch {
	case err != nil:
		return nil, unresolvable("read back after the overwrite", err)
	case cur == nil:
		return nil, unresolvable("read back after the overwrite", output.ErrNoManifest)
	case ours(cur, m):
		return w.won(ctx, m, true), nil
	case complete && cur.Fingerprint != "":
		w.deleteOwnParts(ctx)
		if cur.Fingerprint != m.Fingerprint {
			return nil, conflictError(w.meta.BatchID, cur.Fingerprint, m.Fingerprint)
		}
		return cur, nil
	}
	return nil, w.keep(fmt.Errorf("sink: batch %s: another writer overwrote %s with an incomplete manifest during its recovery", w.meta.BatchID, key))
}

// won finishes a commit whose manifest stands: the removal of what other
// attempts left (only parts older than this writer where onlyOlder, see
// deleteUnlisted), on a goroutine under WithTidyAfterCommit.
func (w *BatchWriter) won(ctx context.Context, m *output.Manifest, onlyOlder bool) *output.Manifest {
	w.tidy(ctx, func(ctx context.Context) {
		w.deleteUnlisted(ctx, m, onlyOlder)
		w.abortOtherUploads(ctx)
	})
	return m
}

// ours says whether the stored manifest cur is the one this writer put as
// m: the same request and the same parts. Part keys carry this attempt's
// id (random, Layout.AttemptPartKey), so no other writer lists them; two
// manifests of no part and one fingerprint describe the same output.
func ours(cur, m *output.Manifest) bool {
	return cur.Fingerprint == m.Fingerprint && cur.BatchID == m.BatchID && sameFiles(cur, m)
}

// keep marks err as a failure after which a stored manifest may list this
// attempt's parts: they are kept (Commit's abort deletes only w.written).
func (w *BatchWriter) keep(err error) error {
	w.mu.Lock()
	w.written = nil
	w.mu.Unlock()
	return fmt.Errorf("%w (%w: parts kept)", err, errUnsure)
}

// tidy runs the removal after a successful commit, on a goroutine under
// WithTidyAfterCommit (Tidied reports its end), else at once.
func (w *BatchWriter) tidy(ctx context.Context, f func(context.Context)) {
	if !w.cfg.tidyAsync {
		f(ctx)
		return
	}
	done := make(chan struct{})
	w.mu.Lock()
	w.tidied = done
	w.mu.Unlock()
	go func() {
		defer close(done)
		f(ctx)
	}()
}

// Tidied is closed once the removal that followed a successful Commit has
// finished (WithTidyAfterCommit); at once when there is none to wait for.
func (w *BatchWriter) Tidied() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tidied == nil {
		done := make(chan struct{})
		close(done)
		return done
	}
	return w.tidied
}

// unsure turns a failed manifest write into its result: nil when the
// manifest there lists our parts after all; err when an exclusive put
// finds another writer's manifest there (ours can no longer land, so our
// parts can go); else err marked errUnsure, and our parts are kept: a put
// that timed out on our side may still land on the store's, after any
// read we make now. Kept parts that no manifest lists are deleted by the
// batch's next successful commit.
func (w *BatchWriter) unsure(ctx context.Context, m *output.Manifest, exclusive bool, err error) error {
	cur, rerr := readManifestTimeout(ctx, w.bucket, w.layout.SuccessKey(), w.cfg.callTimeout)
	if rerr == nil && ours(cur, m) {
		return nil
	}
	if rerr == nil && exclusive {
		return err
	}
	return w.keep(err)
}

func sameFiles(a, b *output.Manifest) bool {
	if len(a.Files) != len(b.Files) {
		return false
	}
	for i := range a.Files {
		if a.Files[i] != b.Files[i] {
			return false
		}
	}
	return true
}

// putManifest writes the manifest, create-if-absent when exclusive.
func (w *BatchWriter) putManifest(ctx context.Context, data []byte, exclusive bool) error {
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	o, err := w.newObject(ctx, w.layout.SuccessKey(), exclusive, &blob.WriterOptions{ContentType: "application/json"})
	if err != nil {
		return err
	}
	if _, err := o.Write(data); err != nil {
		o.Abort()
		return err
	}
	return o.Close()
}

// deleteOwnParts deletes this attempt's parts after another writer's
// manifest won.
func (w *BatchWriter) deleteOwnParts(ctx context.Context) {
	w.mu.Lock()
	keys := w.written
	w.written = nil
	w.mu.Unlock()
	for _, k := range keys {
		w.deleteKey(ctx, k)
	}
}

func (w *BatchWriter) deleteKey(ctx context.Context, key string) error {
	ctx, cancel := w.callCtx(ctx)
	defer cancel()
	if err := w.bucket.Delete(ctx, key); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return err
	}
	return nil
}

// deleteUnlisted removes, best effort, the batch directory's parts that m
// does not list: other attempts' parts, and parts named before attempts.
// After a create-if-absent put won with a fingerprint, every such part is
// garbage: no other writer can make its parts the batch any more, so even
// a live writer's parts may go (it will lose at its own put and delete
// them anyway). After a replace (onlyOlder), a concurrent last-writer-wins
// writer may still be about to publish its parts, so only parts modified
// before this writer started are deleted. Failures are ignored: readers
// go by the manifest, and the next writer of the batch tries again.
// abortOtherUploads aborts every multipart upload still open under the
// batch's directory once its manifest stands: each attempt writes parts of
// its own name, so an attempt killed mid-part leaves an upload that no later
// writer of the batch would ever resume or abort, and the store keeps (and
// bills) it. A live loser's upload fails and its writer finds the manifest.
// Failures are ignored: the start-up sweep and a lifecycle rule remain.
func (w *BatchWriter) abortOtherUploads(ctx context.Context) {
	store.AbortStaleUploads(ctx, w.bucket, w.layout.Dir+"/", 0, w.cfg.callTimeout)
}

func (w *BatchWriter) deleteUnlisted(ctx context.Context, m *output.Manifest, onlyOlder bool) {
	if onlyOlder {
		// Another last-writer-wins writer may have replaced ours since: its
		// parts are then the batch, and ours are what would go.
		cur, err := readManifestTimeout(ctx, w.bucket, w.layout.SuccessKey(), w.cfg.callTimeout)
		if err != nil || !sameFiles(cur, m) {
			return
		}
	}
	listed := make(map[string]bool, len(m.Files))
	for _, f := range m.Files {
		listed[f.Key] = true
	}
	lctx, cancel := w.callCtx(ctx)
	defer cancel()
	it := w.bucket.List(&blob.ListOptions{Prefix: w.layout.Dir + "/part-"})
	var stale []string
	for {
		obj, err := it.Next(lctx)
		if err != nil {
			break // io.EOF, or a listing failure: best effort
		}
		if obj.IsDir || listed[obj.Key] || !w.layout.IsPart(obj.Key) {
			continue
		}
		if onlyOlder && !obj.ModTime.Before(w.started) {
			continue
		}
		stale = append(stale, obj.Key)
	}
	for _, k := range stale {
		w.deleteKey(ctx, k)
	}
}

// Lookup finds the complete output set of a batch, so that a redelivered
// request whose output already exists is answered from its manifest
// without walking or writing anything. Batch directories are found under
// every output kind, graph and algorithm of prefix (a batch id names one
// batch, whatever it walks), and under every graph and algorithm of the
// layout before kinds (see the package comment), so a batch written by an
// earlier version is still found; its manifest's Layout is where it was
// found:
//
//   - a complete manifest (every part it lists present with the listed
//     size) with this fingerprint: that manifest.
//   - a complete manifest with another non-empty fingerprint: an error
//     wrapping ErrBatchConflict (a request error: IsRequestError).
//   - no manifest, an incomplete or unreadable one, or one without a
//     fingerprint (written before fingerprints existed, so whether it
//     matches is unknown): (nil, nil), and the batch is to be written;
//     BatchWriter.Commit then replaces such a manifest.
//   - a failing store: another error (infrastructure; retry).
//
// Parts' checksums are not verified (see partsPresent). An empty
// fingerprint never matches a stored one: it conflicts with any. Of opts
// only WithCallTimeout (to each store call) and WithDirCache apply.
func Lookup(ctx context.Context, bucket *blob.Bucket, prefix, batchID, fingerprint string, opts ...Option) (*output.Manifest, error) {
	cfg, err := lookupConfig(opts)
	if err != nil {
		return nil, err
	}
	timeout := cfg.callTimeout
	if _, err := output.BatchLayout(prefix, output.KindWalks, "g", "a", batchID); err != nil {
		return nil, fmt.Errorf("sink: lookup batch %s: %w", batchID, err)
	}
	dirs, err := cfg.dirCache.BatchDirs(ctx, bucket, prefix, batchID, timeout)
	if err != nil {
		return nil, fmt.Errorf("sink: lookup batch %s: %w", batchID, err)
	}
	var found *output.Manifest
	for _, dir := range dirs {
		m, complete, err := output.ReadComplete(ctx, bucket, dir+"/"+output.SuccessName, timeout)
		if err != nil && !errors.Is(err, output.ErrCorrupt) {
			return nil, fmt.Errorf("sink: lookup batch %s: %w", batchID, err)
		}
		if m == nil || !complete || m.Fingerprint == "" {
			continue
		}
		if m.Fingerprint != fingerprint {
			return nil, conflictError(batchID, m.Fingerprint, fingerprint)
		}
		found = m
	}
	return found, nil
}

// readManifestTimeout is output.ReadManifest bounded by timeout.
func readManifestTimeout(ctx context.Context, b *blob.Bucket, key string, timeout time.Duration) (*output.Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return output.ReadManifest(ctx, b, key)
}

// lookupConfig resolves the options that apply outside a BatchWriter
// (WithCallTimeout, WithDirCache).
func lookupConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.callTimeout <= 0 {
		return cfg, fmt.Errorf("sink: call timeout %v must be positive", cfg.callTimeout)
	}
	return cfg, nil
}
