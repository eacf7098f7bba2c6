package sink

import (
	"errors"
	"fmt"
)

var (
	// ErrBatchConflict is wrapped when a batch id already has a complete
	// output set written for a different request (its manifest records
	// another fingerprint). The request, not the store, is at fault:
	// retrying it unchanged fails again (see IsRequestError). The output
	// already there is left as it is.
	ErrBatchConflict = errors.New("batch id already written by a different request")
)

// IsRequestError says whether err is the request's fault rather than the
// object store's: true only for ErrBatchConflict. Every other sink error
// (an unreachable, slow or refusing store, a full disk) is an
// infrastructure error worth retrying, except ErrBadChunk and
// ErrReorderWindow, which are bugs or limits of the caller.
func IsRequestError(err error) bool { return errors.Is(err, ErrBatchConflict) }

// conflictError names the batch and both fingerprints, shortened: enough to
// tell two requests apart in a log line or dead-letter header.
func conflictError(batchID, stored, ours string) error {
	return fmt.Errorf("sink: batch %s: %w: written with fingerprint %s, this request has %s",
		batchID, ErrBatchConflict, shortFP(stored), shortFP(ours))
}

func shortFP(fp string) string {
	switch {
	case fp == "":
		return `""`
	case len(fp) > 12:
		return fp[:12] + "…"
	}
	return fp
}

// ErrManifestUnresolvable is wrapped when a batch's `_SUCCESS` key can be
// neither created nor read, and the bounded recovery (see
// BatchWriter.Commit) did not clear it: the store holds the key in a state
// of its own (versitygw killed while landing a put kept the key's metadata
// without its data). Not the request's fault, yet retrying the same store
// state fails again: callers retry a few times, then set the batch aside
// with this reason.
var ErrManifestUnresolvable = errors.New("manifest key exists by the store's answer but cannot be read, deleted or overwritten")
