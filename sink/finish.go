package sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/sink/output"
)

// Commit waits for every walk to be uploaded and writes `_SUCCESS` last,
// with a create-if-absent put, so that of several writers of one batch id
// (replicas given the same request, a redelivery racing the original)
// exactly one manifest wins and it lists exactly one attempt's parts:
//
//   - no manifest yet: ours is written; other attempts' parts left in the
//     batch directory are then deleted (best effort), so directory readers
//     such as DuckDB's read_parquet('.../part-*') see only listed parts.
//   - a complete manifest with our fingerprint: our parts are deleted and
//     that manifest is returned as if ours.
//   - a complete manifest with another fingerprint: our parts are deleted
//     and the error wraps ErrBatchConflict; nothing else is touched.
//   - a manifest without a fingerprint (written before fingerprints, or by
//     a writer given none), an incomplete one (a listed part missing or of
//     the wrong size) or an unreadable one: replaced by ours, then the
//     parts older than this writer that ours does not list are deleted.
//     Concurrent writers of such a batch are last-writer-wins, as before.
//
// Before any part is deleted, the manifest found is compared with ours: a
// create of ours that landed but whose answer was lost is refused on the
// SDK's retry by our own manifest, and that is a success (our parts stay,
// other attempts' are removed). A manifest that cannot be read keeps our
// parts too: it may be ours.
//
// A key whose creates are refused while nothing can be read (a store
// killed while landing a put: versitygw keeps the metadata, which its
// create check reads, without the data) is waited out for at least the
// call timeout, in case another writer's put is still landing, then
// recovered in bounded steps: a DELETE and a create again; then a plain
// put of ours, read back. If that still reads nothing the error wraps
// ErrManifestUnresolvable and our parts are kept.
//
// Every walk id of the batch must have been written. On error the batch is
// aborted: this attempt's parts are deleted, nothing else, unless the
// error is one after which a stored manifest may list them.
func (w *BatchWriter) Commit(ctx context.Context) (*output.Manifest, error) {
	w.mu.Lock()
	if w.committed {
		m := w.manifest
		w.mu.Unlock()
		return m, nil
	}
	if w.closed {
		w.mu.Unlock()
		return nil, errors.New("sink: commit after abort")
	}
	w.closed = true
	received := w.received
	w.mu.Unlock()
	if w.visits != nil {
		if err := w.finishVisits(ctx); err != nil {
			w.fail(err)
			return nil, w.finishAbort(ctx)
		}
	}
	if w.samples != nil {
		if err := w.finishSamples(ctx); err != nil {
			w.fail(err)
			return nil, w.finishAbort(ctx)
		}
	}
	if received != w.meta.Walks {
		w.fail(fmt.Errorf("sink: batch %s: %w: %d of %d walks written", w.meta.BatchID, ErrBadChunk, received, w.meta.Walks))
		return nil, w.finishAbort(ctx)
	}
	for _, ch := range []<-chan struct{}{w.done, w.swept} {
		select {
		case <-ch:
		case <-ctx.Done():
			w.fail(ctx.Err())
			return nil, w.finishAbort(ctx)
		}
	}
	if err := w.failed(); err != nil {
		return nil, w.finishAbort(ctx)
	}
	w.stop()
	files := make([]output.File, len(w.files))
	for i := range files {
		f, ok := w.files[i]
		if !ok {
			w.fail(fmt.Errorf("sink: batch %s: part %d missing after upload", w.meta.BatchID, i))
			return nil, w.finishAbort(ctx)
		}
		files[i] = f
	}
	m := &output.Manifest{Version: output.ManifestVersion, BatchID: w.meta.BatchID, Graph: w.meta.Graph, GraphVersion: w.meta.GraphVersion,
		Algorithm: w.algo, Seed: w.meta.Seed, Fingerprint: w.meta.Fingerprint,
		Engine: w.meta.Engine, WalkstageVersion: w.meta.WalkstageVersion, Compression: string(w.cfg.compression),
		Walks: w.meta.Walks, Files: files, EdgeOffsets: w.meta.EdgeOffsets}
	if w.visits != nil {
		w.describeVisits(m)
	}
	if w.samples != nil {
		w.describeSamples(m)
	}
	for _, f := range m.Files {
		m.Steps += f.Steps
		m.Bytes += f.Bytes
	}
	final, err := w.publish(ctx, m)
	if err != nil {
		// Our parts are nobody's: no manifest of ours lists them.
		w.fail(err)
		return nil, w.finishAbort(context.WithoutCancel(ctx))
	}
	w.cfg.dirCache.Add(w.layout.Dir)
	w.mu.Lock()
	w.committed, w.manifest = true, final
	w.mu.Unlock()
	return final, nil
}

// stop ends the pipeline's goroutines and waits for them, then gives
// back the chunks that row groups never encoded still hold
// (WithChunkRelease): after a failure an engine lending its buffers gets
// them back. Groups an encoder took were given back by it; the rest,
// open or queued for the encoders, are still among open.
func (w *BatchWriter) stop() {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	var held []segment
	for _, gr := range w.open {
		held = append(held, gr.segs...)
		gr.segs = nil
	}
	w.mu.Unlock()
	for _, sg := range held {
		w.unref(sg.c)
	}
}

// Abort cancels the batch: the part being uploaded is abandoned (an S3
// multipart upload is aborted, a local temporary file removed), parts this
// writer completed are deleted, and no `_SUCCESS` is written. Nothing
// another writer wrote is touched: an earlier complete output of the batch
// stays as it was. It is safe to call after Commit failed, and a no-op
// after Commit succeeded.
func (w *BatchWriter) Abort(ctx context.Context) error {
	w.mu.Lock()
	if w.committed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.fail(ErrAborted)
	_, err := w.cleanup(ctx)
	return err
}

// finishAbort cleans up after a failed Commit and returns the failure.
func (w *BatchWriter) finishAbort(ctx context.Context) error {
	cause, err := w.cleanup(ctx)
	if err != nil {
		return fmt.Errorf("%w (and %v)", cause, err)
	}
	return cause
}

// cleanup stops the pipeline and deletes the parts this attempt completed;
// it returns the recorded failure and any cleanup error.
func (w *BatchWriter) cleanup(ctx context.Context) (cause, err error) {
	w.stop()
	w.abortVisits()
	w.abortSamples()
	w.mu.Lock()
	keys := w.written
	w.written = nil
	// A part whose upload was cut short may still land: the store can
	// finish a request its client gave up on (an aborted attempt's first
	// part appeared after Abort: gofakes3 3 runs in 320, versitygw 1 in
	// 300, under load). Such parts are deleted too, and again after short
	// pauses; the uploader has stopped, so partsOpened is final. A store
	// slower than that still leaves the part, for a later attempt's sweep
	// of stale leftovers (NewBatchWriter).
	// (Completed parts are in files; those a commit left unsure of its
	// manifest keeps are not in keys, and stay.)
	var cut []string
	for i := range w.partsOpened {
		if _, done := w.files[i]; !done {
			cut = append(cut, w.layout.AttemptPartKey(i, w.attempt))
		}
	}
	w.partsOpened = 0
	cause = w.err
	if w.abortErr != nil {
		err, w.abortErr = fmt.Errorf("sink: batch %s: %w", w.meta.BatchID, w.abortErr), nil
	}
	w.mu.Unlock()
	if err != nil {
		return cause, err
	}
	for _, k := range append(keys, cut...) {
		if err := w.deleteKey(ctx, k); err != nil {
			return cause, fmt.Errorf("sink: batch %s: delete %s: %w", w.meta.BatchID, k, err)
		}
	}
	for _, pause := range cutPartPauses {
		if len(cut) == 0 || ctxsleep.Sleep(ctx, pause) != nil {
			break
		}
		for _, k := range cut {
			if err := w.deleteKey(ctx, k); err != nil {
				return cause, fmt.Errorf("sink: batch %s: delete %s: %w", w.meta.BatchID, k, err)
			}
		}
	}
	if w.sweepOnCleanup {
		// No manifest from this attempt, so no commit aborted what killed
		// attempts left: remove it now (see NewBatchWriter).
		if err := w.removeLeftovers(ctx); err != nil {
			return cause, err
		}
	}
	return cause, nil
}

// cutPartPauses are the waits before deleting again the parts whose upload
// an abort cut short (cleanup): 0.4 s in all, paid only by such an abort.
var cutPartPauses = [...]time.Duration{20 * time.Millisecond, 80 * time.Millisecond, 300 * time.Millisecond}
