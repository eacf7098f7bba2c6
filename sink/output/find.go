package output

import (
	"context"
	"errors"
	"fmt"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/walkstage/walkstage/store"
)

// FindBatches returns every complete output set of batchID under prefix
// (every part its manifest lists present with the listed size), with or
// without a fingerprint, searched as sink.Lookup searches: under every output
// kind, graph and algorithm, and under the layout before kinds. Each
// manifest's Layout is where it was found. A tool that writes batches
// outside the stage (`walkstage walk`) uses it to refuse, or knowingly
// replace, an output of its batch id made by another request. Of opts only
// store.WithCallTimeout applies, to each store call.
func FindBatches(ctx context.Context, bucket *blob.Bucket, prefix, batchID string, opts ...store.Option) ([]*Manifest, error) {
	timeout, err := store.CallTimeout(opts...)
	if err != nil {
		return nil, err
	}
	if _, err := BatchLayout(prefix, KindWalks, "g", "a", batchID); err != nil {
		return nil, fmt.Errorf("sink: find batch %s: %w", batchID, err)
	}
	dirs, err := BatchDirs(ctx, bucket, prefix, batchID, timeout)
	if err != nil {
		return nil, fmt.Errorf("sink: find batch %s: %w", batchID, err)
	}
	var found []*Manifest
	for _, dir := range dirs {
		m, complete, err := ReadComplete(ctx, bucket, dir+"/"+SuccessName, timeout)
		if err != nil && !errors.Is(err, ErrCorrupt) {
			return nil, fmt.Errorf("sink: find batch %s: %w", batchID, err)
		}
		if m != nil && complete {
			found = append(found, m)
		}
	}
	return found, nil
}

// DeleteBatch removes the output set of a manifest read from the store
// (FindBatches, sink.Lookup, ReadManifest): the manifest first, so that a reader
// going by it never finds a part missing, then the parts it lists. Parts of
// attempts that lost stay until the batch directory's next commit removes
// them. Of opts only store.WithCallTimeout applies, to each store call.
func DeleteBatch(ctx context.Context, bucket *blob.Bucket, m *Manifest, opts ...store.Option) error {
	timeout, err := store.CallTimeout(opts...)
	if err != nil {
		return err
	}
	if m.dir == "" {
		return fmt.Errorf("sink: delete batch %s: the manifest was not read from the store", m.BatchID)
	}
	keys := []string{m.dir + "/" + SuccessName}
	for _, f := range m.Files {
		keys = append(keys, f.Key)
	}
	for _, k := range keys {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		err := bucket.Delete(cctx, k)
		cancel()
		if err != nil && gcerrors.Code(err) != gcerrors.NotFound {
			return fmt.Errorf("sink: delete batch %s: %s: %w", m.BatchID, k, err)
		}
	}
	return nil
}
