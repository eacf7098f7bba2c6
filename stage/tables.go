package stage

// Iceberg tables (WALKSTAGE_TABLE_CATALOG): a batch whose objects are
// durable is appended to its kind's table before its event is published,
// so an event never names a batch the tables do not show, and an offset is
// never committed before the table holds the batch. The append is
// idempotent (icetable recognises the batch id), so a redelivery or a
// retry after a lost commit answer adds nothing twice.

import (
	"context"
	"fmt"

	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// Tables appends committed batches to table storage; *icetable.Tables
// implements it.
type Tables interface {
	Append(ctx context.Context, b icetable.Batch) error
}

// tableWaitBatches is how many batches may wait for their table commit
// outside the in-flight window: a few windows' worth, so the commits,
// grouped, keep up without the window stalling the walks.
func tableWaitBatches(maxInFlight int) int { return 4 * maxInFlight }

// appendTable appends the batch man describes to its table, when the stage
// has tables. The batch's objects are durable by now, so it moves from its
// in-flight slot to a table-wait slot first: a commit groups many batches,
// and each batch waiting for it in the in-flight window would stop others
// from walking. The event, and so the offset, still waits for the commit.
func (s *Stage) appendTable(ctx context.Context, b *batch, man *output.Manifest) error {
	if s.o.Tables == nil {
		return nil
	}
	if !b.tableSlot {
		select {
		case s.tableSlots <- struct{}{}:
			b.tableSlot = true
		case <-ctx.Done():
			return ctx.Err()
		}
		s.releaseSlot(b)
	}
	tb := icetable.Batch{Kind: man.Kind(), ID: man.BatchID, Fingerprint: man.Fingerprint}
	if b.v.g.HasStringIDs() {
		tb.Kind += icetable.StringIDs // string vertex columns: tables of their own
	}
	for _, f := range man.Files {
		tb.Files = append(tb.Files, icetable.File{URL: store.ObjectURL(s.o.BucketURL, f.Key), Rows: f.Rows, Bytes: f.Bytes})
	}
	if err := s.o.Tables.Append(ctx, tb); err != nil {
		return fmt.Errorf("append to the %s table: %w", tb.Kind, err)
	}
	return nil
}

// releaseTableSlot gives b's table-wait slot back, if it holds one.
func (s *Stage) releaseTableSlot(b *batch) {
	if b.tableSlot {
		b.tableSlot = false
		<-s.tableSlots
	}
}
