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
)

// srcRef names a record of the input topic.
type srcRef struct {
	topic     string
	partition int
	offset    int64
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
	seen  map[srcRef]struct{}
	order []srcRef // insertion order, to bound memory
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

// dlqIndexLimit bounds the records the index remembers.
const dlqIndexLimit = 1 << 20

func startDLQIndex(o KafkaOptions, topic string, window int64, log *slog.Logger) (*dlqIndex, error) {
	d, err := o.dialer()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &dlqIndex{seen: map[srcRef]struct{}{}, limit: dlqIndexLimit, ready: make(chan struct{}), stop: cancel, log: log,
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
		if !sleepFor(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) {
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

func (x *dlqIndex) followPartition(ctx context.Context, d *kafka.Dialer, brokers []string, topic string, partition int,
	window int64, caughtUp func()) {
	var first, last int64
	for attempt := 1; ; attempt++ {
		var err error
		first, last, err = offsets(ctx, d, brokers[attempt%len(brokers)], topic, partition)
		if err == nil {
			break
		}
		if !sleepFor(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) {
			return
		}
	}
	start := max(first, last-window)
	x.mu.Lock()
	x.next[partition].Store(start)
	x.mu.Unlock()
	if start >= last {
		caughtUp()
		caughtUp = nil
	}
	// A short long poll: Close waits for the one in flight, and this
	// reader logs nothing, so its idle timeouts make no noise.
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: topic, Partition: partition, Dialer: d,
		MaxWait: 500 * time.Millisecond, MaxBytes: 64 << 20, Logger: kafka.LoggerFunc(func(string, ...any) {})})
	defer r.Close()
	if err := r.SetOffset(start); err != nil {
		x.log.Warn("dead-letter index: cannot position the reader", "partition", partition, "err", err)
		return
	}
	for {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			return // ctx ended or the reader closed
		}
		if ref, ok := refOf(m); ok {
			x.add(ref)
		}
		x.mu.Lock()
		next := x.next[partition]
		x.mu.Unlock()
		next.Store(m.Offset + 1)
		if caughtUp != nil && m.Offset >= last-1 {
			caughtUp()
			caughtUp = nil
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
	var ref srcRef
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
	x.seen[ref] = struct{}{}
	x.order = append(x.order, ref)
	if len(x.order) > x.limit {
		delete(x.seen, x.order[0])
		x.order = x.order[1:]
	}
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
			if !sleepFor(ctx, 20*time.Millisecond) {
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

func sleepFor(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
