package source

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/internal/ctxsleep"
)

// srcRef names a record of the input topic. The offset alone does not: a
// partition whose log is replaced (a broker back without its data, the topic
// deleted and created again) gives the same offsets to new records, so the
// record's timestamp (Unix milliseconds) is part of its name. Copies written
// before the timestamp header existed have ts -1 and match any timestamp
// until their partition's log is reset.
type srcRef struct {
	topic     string
	partition int
	offset    int64
	ts        int64
}

// dlqIndex remembers which input records already have a dead-letter copy,
// read back from the dead-letter topic's own headers. A rejection is
// dead-lettered at once but committed only once every earlier record of its
// partition is done, so a replica killed (or a partition moved) in between
// gets it again; without the index each such redelivery wrote one more
// copy (the chaos suite counted 17 in a short run). The index reads the
// last window records of every dead-letter partition at start-up, then
// follows the topic, so copies written by other replicas count as well.
type dlqIndex struct {
	mu    sync.Mutex
	seen  map[srcRef]uint64 // the entry's place in order
	order []seqRef          // insertion order, to bound memory
	seq   uint64
	limit int
	ready chan struct{} // closed once the start-up read reached the end
	// next is, per partition, the offset after the last record read; sync
	// compares it with the partition's end.
	next    map[int]*atomic.Int64
	d       *kafka.Dialer
	brokers []string
	topic   string
	stop    context.CancelFunc
	wg      sync.WaitGroup
	log     *slog.Logger
}

type seqRef struct {
	ref srcRef
	seq uint64
}

// dlqIndexLimit bounds the records the index remembers.
const dlqIndexLimit = 1 << 20

func startDLQIndex(o KafkaOptions, topic string, window int64, log *slog.Logger) (*dlqIndex, error) {
	d, err := o.dialer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &dlqIndex{seen: map[srcRef]uint64{}, limit: dlqIndexLimit, ready: make(chan struct{}), stop: cancel, log: log,
		next: map[int]*atomic.Int64{}, d: d, brokers: o.Brokers, topic: topic}
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.follow(ctx, d, o.Brokers, topic, window)
	}()
	return x, nil
}

// follow reads every partition of topic from window records before its end
// and keeps reading until ctx ends; ready closes when each partition has
// reached the end it had at start.
func (x *dlqIndex) follow(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, window int64) {
	var parts []kafka.Partition
	for attempt := 1; ; attempt++ {
		var err error
		lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		parts, err = d.LookupPartitions(lctx, "tcp", brokers[attempt%len(brokers)], topic)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		if attempt == 1 {
			x.log.Warn("dead-letter index: cannot list the dead-letter topic's partitions yet; retrying", "topic", topic, "err", err)
		}
		if ctxsleep.Sleep(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) != nil {
			return
		}
	}
	var pending sync.WaitGroup
	pending.Add(len(parts))
	x.mu.Lock()
	for _, p := range parts {
		x.next[p.ID] = new(atomic.Int64)
	}
	x.mu.Unlock()
	for _, p := range parts {
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			x.followPartition(ctx, d, brokers, topic, p.ID, window, pending.Done)
		}()
	}
	go func() {
		pending.Wait()
		close(x.ready)
	}()
}

// offsetsRetrying reads the partition's log bounds, from each broker in
// turn, backing off up to 5 s between tries; false once ctx is done.
func offsetsRetrying(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int) (first, last int64, ok bool) {
	for attempt := 1; ; attempt++ {
		var err error
		first, last, err = offsets(ctx, d, brokers[attempt%len(brokers)], topic, partition)
		if err == nil {
			return first, last, true
		}
		if ctxsleep.Sleep(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) != nil {
			return 0, 0, false
		}
	}
}

func (x *dlqIndex) followPartition(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int,
	window int64, caughtUp func()) {
	first, last, ok := offsetsRetrying(ctx, d, brokers, topic, partition)
	if !ok {
		return
	}
	start := max(first, last-window)
	x.mu.Lock()
	next := x.next[partition]
	x.mu.Unlock()
	next.Store(start)
	if start >= last {
		caughtUp()
		caughtUp = nil
	}
	for ctx.Err() == nil {
		rerr := x.readFrom(ctx, d, brokers, topic, partition, start, last, &caughtUp)
		if ctxsleep.Sleep(ctx, 200*time.Millisecond) != nil {
			return
		}
		if first, last, ok = offsetsRetrying(ctx, d, brokers, topic, partition); !ok {
			return
		}
		was := next.Load()
		if was <= last {
			start = was
			continue
		}
		// The dead-letter partition's log ends below where the index was
		// (a broker back without its data, the topic created again):
		// kafka-go's reader would wait there silently until the new log
		// grew past it, skipping the copies in between. Start over at the
		// new log's beginning.
		x.log.Warn("dead-letter index: the dead-letter partition's log went backwards; reading it again from its start",
			"topic", topic, "partition", partition, "old_offset", was, "new_offset", first, "new_end", last, "err", rerr)
		start = first
		next.Store(first)
	}
}

// readFrom follows one dead-letter partition from start until ctx ends or
// the reader fails (an offset beyond the partition's end).
func (x *dlqIndex) readFrom(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int,
	start, last int64, caughtUp *func()) error {
	// A short long poll: Close waits for the one in flight, and this
	// reader logs nothing, so its idle timeouts make no noise.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: partition, Dialer: d,
		MaxWait: 500 * time.Millisecond, MaxBytes: 64 << 20, Logger: kafka.LoggerFunc(func(string, ...any) {}),
		OffsetOutOfRangeError: true})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		return err
	}
	x.mu.Lock()
	next := x.next[partition]
	x.mu.Unlock()
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return err
		}
		if ref, ok := refOf(m); ok {
			x.add(ref)
		}
		next.Store(m.Offset + 1)
		if *caughtUp != nil && m.Offset >= last-1 {
			(*caughtUp)()
			*caughtUp = nil
		}
	}
}

func offsets(ctx context.Context, d *kafka.Dialer, broker, topic string, partition int) (first, last int64, err error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := d.DialLeader(dctx, "tcp", broker, topic, partition)
	if err != nil {
		return 0, 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn.ReadOffsets()
}

// refOf reads the input record a dead-letter copy came from.
func refOf(m kafka.Message) (srcRef, bool) {
	ref := srcRef{ts: -1}
	var havePart, haveOff bool
	for _, h := range m.Headers {
		switch h.Key {
		case HeaderSourceTopic:
			ref.topic = string(h.Value)
		case HeaderSourcePartition:
			v, err := strconv.Atoi(string(h.Value))
			ref.partition, havePart = v, err == nil
		case HeaderSourceOffset:
			v, err := strconv.ParseInt(string(h.Value), 10, 64)
			ref.offset, haveOff = v, err == nil
		case HeaderSourceTimestamp:
			if v, err := strconv.ParseInt(string(h.Value), 10, 64); err == nil {
				ref.ts = v
			}
		}
	}
	return ref, ref.topic != "" && havePart && haveOff
}

func (x *dlqIndex) add(ref srcRef) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, ok := x.seen[ref]; ok {
		return
	}
	x.seq++
	x.seen[ref] = x.seq
	x.order = append(x.order, seqRef{ref, x.seq})
	for len(x.order) > x.limit {
		// An entry forgotten and added again has a later seq: the old
		// place in order no longer owns it.
		if old := x.order[0]; x.seen[old.ref] == old.seq {
			delete(x.seen, old.ref)
		}
		x.order = x.order[1:]
	}
}

// forget drops what the index knows of one input partition: its log was
// replaced, and the copies it knew name records that are gone.
func (x *dlqIndex) forget(topic string, partition int) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for ref := range x.seen {
		if ref.topic == topic && ref.partition == partition {
			delete(x.seen, ref)
			n++
		}
	}
	return n
}

// has reports whether ref already has a copy. It first waits, at most
// wait, for the start-up read: until then a copy written before a restart
// may not be known yet. After that wait it answers from what it has (a
// duplicate is then possible, a lost dead letter never).
func (x *dlqIndex) has(ctx context.Context, ref srcRef, wait time.Duration) (bool, error) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-x.ready:
	case <-t.C:
		x.log.Warn("dead-letter index not read up to date yet; a rejection may be copied twice", "topic", ref.topic,
			"partition", ref.partition, "offset", ref.offset)
	case <-ctx.Done():
		return false, fmt.Errorf("dead-letter index: %w", ctx.Err())
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	_, ok := x.seen[ref]
	if !ok {
		legacy := ref
		legacy.ts = -1
		_, ok = x.seen[legacy]
	}
	return ok, nil
}

// sync waits, at most wait, until the index has read every record the
// dead-letter topic holds now. A write whose outcome is unknown (the broker
// went away before it answered) may have landed: before it is retried, the
// index must have seen the topic's current end, or the retry copies the
// record a second time.
func (x *dlqIndex) sync(ctx context.Context, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	select {
	case <-x.ready:
	case <-ctx.Done():
		return fmt.Errorf("dead-letter index: start-up read: %w", ctx.Err())
	}
	x.mu.Lock()
	parts := make(map[int]*atomic.Int64, len(x.next))
	for p, n := range x.next {
		parts[p] = n
	}
	x.mu.Unlock()
	for p, next := range parts {
		_, last, err := offsets(ctx, x.d, x.brokers[p%len(x.brokers)], x.topic, p)
		if err != nil {
			return fmt.Errorf("dead-letter index: end of partition %d: %w", p, err)
		}
		for next.Load() < last {
			if ctxsleep.Sleep(ctx, 20*time.Millisecond) != nil {
				return fmt.Errorf("dead-letter index: partition %d read to %d of %d: %w", p, next.Load(), last, ctx.Err())
			}
		}
	}
	return nil
}

func (x *dlqIndex) close() {
	x.stop()
	x.wg.Wait()
}
