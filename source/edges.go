package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/livegraph"
)

// ReasonBadEdgeUpdate is the dead-letter reason of an edge-topic record
// that is not a valid edge update (livegraph.ErrBadUpdate).
const ReasonBadEdgeUpdate = "bad_edge_update"

// EdgeReaderConfig configures an EdgeReader.
type EdgeReaderConfig struct {
	Kafka KafkaOptions
	// Topic is the edge topic (WALKSTAGE_EDGE_TOPIC).
	Topic string
	// DLQTopic receives bad records, with the headers of a rejected
	// request's copy (reason ReasonBadEdgeUpdate).
	DLQTopic string
	// Start is, per partition, the offset to read from: the watermark of
	// the version the live graph starts from. A partition without one is
	// read from its first offset.
	Start map[int32]int64
	// MaxBytes bounds one fetch (default 16 MiB).
	MaxBytes int
	// Check, when set, refuses decoded updates that cannot fit the graph
	// (livegraph.Live.CheckSchema); such a record is dead-lettered too.
	Check func([]livegraph.Update) error
	// CallTimeout bounds a dead-letter write (default 30 s).
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// EdgeBatch is one record of the edge topic, decoded: its updates, or none
// when it was bad and has been dead-lettered (Rejected says why). The
// applier applies it (livegraph.Live.Apply) either way, so the watermark
// moves past it.
type EdgeBatch struct {
	Partition int32
	Offset    int64
	Updates   []livegraph.Update
	Rejected  error
	// Time is the record's timestamp (zero when it has none), and
	// HighWaterMark the partition's end offset when it was fetched: the
	// applier measures update-to-walkable time and the watermark's lag
	// from them.
	Time          time.Time
	HighWaterMark int64
	// free is where Release hands Updates back (nil: nowhere).
	free *updateFree
}

// Release hands b's updates back to the reader that decoded them, for a
// later record of the same encoding; b.Updates is nil afterwards and the
// caller must keep no other reference to them. The applier calls it once
// the pass that applied b is over: livegraph.Live keeps no reference to a
// record's updates past ApplyRecords (a running compaction copies what it
// keeps). Without it every binary record is decoded into a new slice, 48
// bytes an update, which at 5 M updates/s is a quarter GB a second of
// garbage for the collector beside the walks (docs/benchmarks/live-graph.md,
// "The stage's allocations beside the ingest").
func (b *EdgeBatch) Release() {
	if b.free != nil {
		b.free.put(b.Updates)
	}
	b.Updates = nil
}

// freeUpdates bounds the updates' room the free list holds (24 MiB at 48
// bytes an update): two of the applier's passes of 4,096-update records
// (stage/live takes up to 64 records a pass), or a few huge records; a
// slice that would pass it is left to the collector.
const freeUpdates = 1 << 19

// updateFree is an EdgeReader's free list of decoded-update slices,
// shared by its partitions' goroutines and the applier that releases them.
type updateFree struct {
	mu   sync.Mutex
	bufs [][]livegraph.Update
	held int // the capacity of bufs' slices, in updates
}

// get returns an empty slice with room from the list, or nil.
func (f *updateFree) get() []livegraph.Update {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := len(f.bufs)
	if n == 0 {
		return nil
	}
	s := f.bufs[n-1]
	f.bufs[n-1] = nil
	f.bufs = f.bufs[:n-1]
	f.held -= cap(s)
	return s
}

// put keeps s for a later get, unless the list is full.
func (f *updateFree) put(s []livegraph.Update) {
	if cap(s) == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held+cap(s) > freeUpdates {
		return
	}
	f.bufs = append(f.bufs, s[:0])
	f.held += cap(s)
}

// decode decodes rec: a binary record into a slice from the free list
// (livegraph.DecodeBinaryInto), a JSON one as livegraph.Decode does.
func (f *updateFree) decode(rec []byte) ([]livegraph.Update, error) {
	if !bytes.HasPrefix(rec, []byte(livegraph.BinaryMagic)) {
		return livegraph.Decode(rec)
	}
	buf := f.get()
	ups, err := livegraph.DecodeBinaryInto(buf, rec)
	if err != nil {
		f.put(buf)
		return nil, err
	}
	return ups, nil
}

// EdgeReader reads every partition of the edge topic by assignment, not as
// a group member: each replica holds the whole graph, so each reads all of
// it. It decodes the records and dead-letters the bad ones.
type EdgeReader struct {
	cfg    EdgeReaderConfig
	dialer *kafka.Dialer
	dlq    *kafka.Writer
	log    *slog.Logger
	free   updateFree
}

// NewEdgeReader checks cfg; nothing is dialled before Run.
func NewEdgeReader(cfg EdgeReaderConfig) (*EdgeReader, error) {
	if err := cfg.Kafka.validate(); err != nil {
		return nil, fmt.Errorf("edge reader: %w", err)
	}
	if cfg.Topic == "" || cfg.DLQTopic == "" {
		return nil, errors.New("edge reader: the edge topic and the dead-letter topic must be named")
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = 16 << 20
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d, err := cfg.Kafka.dialer()
	if err != nil {
		return nil, fmt.Errorf("edge reader: %w", err)
	}
	w, err := newWriter(cfg.Kafka, cfg.DLQTopic, defaultMaxMessageBytes)
	if err != nil {
		return nil, fmt.Errorf("edge reader: %w", err)
	}
	w.MaxAttempts = 1 // deadLetter retries itself; the writer's own retry would run on past its deadline (newWriter)
	return &EdgeReader{cfg: cfg, dialer: d, dlq: w, log: cfg.Logger}, nil
}

// Close releases the dead-letter writer.
func (r *EdgeReader) Close() error { return r.dlq.Close() }

// Run reads every partition the edge topic has when it starts, one
// goroutine each, and sends each record's batch on out, in offset order
// within a partition. It returns ctx's error once ctx is done, or the first
// error no retry cures (the topic is missing, a fetch fails); every
// goroutine has stopped by then.
func (r *EdgeReader) Run(ctx context.Context, out chan<- EdgeBatch) error {
	conn, err := r.dialer.DialContext(ctx, "tcp", r.cfg.Kafka.Brokers[0])
	if err != nil {
		return fmt.Errorf("edge topic %s: %w", r.cfg.Topic, err)
	}
	parts, err := conn.ReadPartitions(r.cfg.Topic)
	conn.Close()
	if err != nil {
		return fmt.Errorf("edge topic %s: partitions: %w", r.cfg.Topic, err)
	}
	if len(parts) == 0 {
		return fmt.Errorf("edge topic %s does not exist", r.cfg.Topic)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(parts))
	for _, p := range parts {
		wg.Go(func() {
			if err := r.readPartition(ctx, int32(p.ID), out); err != nil && ctx.Err() == nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return ctx.Err()
	}
}

func (r *EdgeReader) readPartition(ctx context.Context, part int32, out chan<- EdgeBatch) error {
	kr := kafka.NewReader(kafka.ReaderConfig{Brokers: r.cfg.Kafka.Brokers, Topic: r.cfg.Topic, Partition: int(part),
		Dialer: r.dialer, MinBytes: 1, MaxBytes: r.cfg.MaxBytes, MaxWait: 250 * time.Millisecond})
	defer kr.Close()
	start, ok := r.cfg.Start[part]
	if !ok {
		start = kafka.FirstOffset
	}
	if err := kr.SetOffset(start); err != nil {
		return fmt.Errorf("edge topic %s partition %d: offset %d: %w", r.cfg.Topic, part, start, err)
	}
	for {
		m, err := kr.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("edge topic %s partition %d: %w", r.cfg.Topic, part, err)
		}
		b := r.batch(part, m)
		if b.Rejected != nil {
			if err := r.deadLetter(ctx, m, b.Rejected); err != nil {
				return err
			}
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// batch decodes m, a record of partition part, into a slice from the free
// list, and checks its updates.
func (r *EdgeReader) batch(part int32, m kafka.Message) EdgeBatch {
	b := EdgeBatch{Partition: part, Offset: m.Offset, Time: m.Time, HighWaterMark: m.HighWaterMark, free: &r.free}
	b.Updates, b.Rejected = r.free.decode(m.Value)
	if b.Rejected == nil && r.cfg.Check != nil {
		b.Rejected = r.cfg.Check(b.Updates)
	}
	return b
}

// deadLetter copies a bad record to the dead-letter topic and waits until
// the copy is durable. (A replica that replays the topic after a restart
// copies such a record again: the edge reader keeps no index of its copies
// yet, unlike the request consumer.)
func (r *EdgeReader) deadLetter(ctx context.Context, m kafka.Message, cause error) error {
	r.log.Warn("bad edge update dead-lettered", "partition", m.Partition, "offset", m.Offset, "err", cause)
	msg := deadLetterRecord(m, ReasonBadEdgeUpdate, cause.Error(), int(r.dlq.BatchBytes))
	// A broker away is not the record's fault: retry, with capped
	// back-off, until the copy is durable or the reader stops.
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		wctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		err := r.dlq.WriteMessages(wctx, msg)
		cancel()
		if err == nil {
			return nil
		}
		r.log.Warn("dead-letter of an edge record failed; retrying", "partition", m.Partition, "offset", m.Offset,
			"topic", r.cfg.DLQTopic, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("dead-letter edge record %s/%d@%d to %s: %w", m.Topic, m.Partition, m.Offset, r.cfg.DLQTopic, err)
		case <-time.After(wait):
		}
	}
}
