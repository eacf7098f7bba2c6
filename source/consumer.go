package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/graph"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Kafka            KafkaOptions
	Topic            string // input topic
	Group            string // consumer group id
	DLQTopic         string // rejected messages are copied here
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Limits           Limits
	// Graph resolves seed ids and checks algorithms against the graph's
	// weights and labels.
	Graph  *graph.Graph
	Logger *slog.Logger
}

// Consumer reads requests from the input topic as a member of a consumer
// group and commits each partition's offsets in order, only as far as every
// earlier message of that partition has been acknowledged.
type Consumer struct {
	r    *kafka.Reader
	dlq  *kafka.Writer
	g    *graph.Graph
	lim  Limits
	log  *slog.Logger
	trk  *tracker
	stop chan struct{}
	wg   sync.WaitGroup

	// commitMu serialises commits so they reach the broker in the order the
	// tracker produced them; a later commit never carries a lower offset.
	commitMu sync.Mutex
	joined   atomic.Bool
	lagMu    sync.Mutex
	lag      map[tp]int64 // per partition: high watermark - next offset, as of the last fetch
	closed   sync.Once
}

// NewConsumer joins the group in the background; Joined reports when it has.
func NewConsumer(cfg ConsumerConfig) (*Consumer, error) {
	if err := cfg.Kafka.validate(); err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if cfg.Topic == "" || cfg.Group == "" || cfg.DLQTopic == "" {
		return nil, errors.New("consumer: topic, group and dead-letter topic are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 30 * time.Second
	}
	if cfg.RebalanceTimeout == 0 {
		cfg.RebalanceTimeout = 30 * time.Second
	}
	d, err := cfg.Kafka.dialer()
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	maxBytes := max(10<<20, 2*cfg.Limits.MaxMessageBytes)
	log := cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group)
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers: cfg.Kafka.Brokers,
		GroupID: cfg.Group,
		Topic:   cfg.Topic,
		Dialer:  d,
		// A new group starts at the oldest retained request: requests
		// published before the first replica started must not be lost.
		StartOffset: kafka.FirstOffset,
		// Zero makes CommitMessages synchronous: Commit returns only when
		// the broker has the offset.
		CommitInterval:    0,
		MaxBytes:          maxBytes,
		MaxWait:           250 * time.Millisecond,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		HeartbeatInterval: max(cfg.SessionTimeout/10, 100*time.Millisecond),
		JoinGroupBackoff:  time.Second,
		// Pick up partitions added to the input topic without a restart.
		WatchPartitionChanges: true,
		Logger:                kafka.LoggerFunc(func(f string, a ...any) { log.Debug(fmt.Sprintf(f, a...)) }),
		ErrorLogger:           kafka.LoggerFunc(func(f string, a ...any) { log.Warn(fmt.Sprintf(f, a...)) }),
	})
	dlq, err := newWriter(cfg.Kafka, cfg.DLQTopic)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c := &Consumer{r: r, dlq: dlq, g: cfg.Graph, lim: cfg.Limits, log: log, trk: newTracker(), stop: make(chan struct{}),
		lag: map[tp]int64{}}
	c.wg.Add(1)
	go c.watch()
	return c, nil
}

// watch samples the reader's statistics: joining the group shows as its
// first generation.
func (c *Consumer) watch() {
	defer c.wg.Done()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		s := c.r.Stats() // resets the counters: keep our own view
		if s.Rebalances > 0 {
			c.joined.Store(true)
		}
	}
}

// Joined reports whether the consumer has joined its group at least once.
func (c *Consumer) Joined() bool { return c.joined.Load() }

// Lag is the number of messages behind the end of the partitions this
// consumer has fetched from, as of each partition's last fetch (every
// fetched message carries its partition's high watermark). kafka-go's own
// reader lag is that of whichever partition reported last.
func (c *Consumer) Lag() int64 {
	c.lagMu.Lock()
	defer c.lagMu.Unlock()
	var n int64
	for _, l := range c.lag {
		n += l
	}
	return n
}

// Pending is the number of fetched messages not yet acknowledged.
func (c *Consumer) Pending() int { return c.trk.pending() }

// Next blocks for the next message and decodes it. A message that fails
// validation is still a delivery (Reject set): the caller reports it, dead-
// letters it and commits it like any other. The error is the reader's
// (ctx cancelled, reader closed).
func (c *Consumer) Next(ctx context.Context) (*Delivery, error) {
	m, err := c.r.FetchMessage(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", c.r.Config().Topic, err)
	}
	c.trk.fetched(m.Topic, m.Partition, m.Offset)
	c.lagMu.Lock()
	c.lag[tp{m.Topic, m.Partition}] = max(0, m.HighWaterMark-m.Offset-1)
	c.lagMu.Unlock()
	c.joined.Store(true) // a group reader fetches only once it has an assignment
	d := &Delivery{Received: time.Now(), c: c, msg: m}
	req, err := DecodeRequest(m.Key, m.Value, c.g, c.lim)
	if err != nil {
		var re *RejectError
		if !errors.As(err, &re) {
			re = &RejectError{Reason: ReasonMalformed, BatchID: string(m.Key), Msg: err.Error()}
		}
		d.Reject = re
	} else {
		d.Request = req
	}
	return d, nil
}

// Close leaves the group and closes the connections. Uncommitted messages
// are redelivered to the group.
func (c *Consumer) Close() error {
	var err error
	c.closed.Do(func() {
		close(c.stop)
		c.wg.Wait()
		err = errors.Join(c.r.Close(), c.dlq.Close())
	})
	return err
}

// Delivery is one fetched message: a valid Request, or a Reject saying why
// not. Exactly one of the two is set.
type Delivery struct {
	Request  *Request
	Reject   *RejectError
	Received time.Time

	c     *Consumer
	msg   kafka.Message
	acked atomic.Bool
}

// BatchID is the request's batch id, or for a rejection what could be read
// of it (maybe empty).
func (d *Delivery) BatchID() string {
	if d.Request != nil {
		return d.Request.BatchID
	}
	return d.Reject.BatchID
}

// Commit acknowledges the delivery: the stage calls it once the batch's
// objects, manifest and completion event are durable. The partition's
// offset advances past it as soon as every earlier message of the
// partition is acknowledged too; until then the commit is deferred (and
// made by the call that closes the gap). Calling it twice is a no-op.
func (d *Delivery) Commit(ctx context.Context) error {
	if d.acked.Swap(true) {
		return nil
	}
	c := d.c
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	off, ok := c.trk.ack(d.msg.Topic, d.msg.Partition, d.msg.Offset)
	if !ok {
		return nil
	}
	// CommitMessages commits offset+1 of the message it is given. It waits
	// for the group's current generation, so a rebalance that never settles
	// could hold every later commit behind commitMu: bound it. A commit that
	// times out is retried by the partition's next acknowledgement, and at
	// worst the batch is redelivered and rewritten identically.
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	err := c.r.CommitMessages(cctx, kafka.Message{Topic: d.msg.Topic, Partition: d.msg.Partition, Offset: off})
	if err != nil {
		// Nothing is marked committed: the next acknowledgement on this
		// partition retries up to its own point, which includes this one.
		return fmt.Errorf("commit %s/%d offset %d (batch %s): %w", d.msg.Topic, d.msg.Partition, off, d.BatchID(), err)
	}
	c.trk.committed(d.msg.Topic, d.msg.Partition, off)
	return nil
}

const commitTimeout = 30 * time.Second

// Header names on dead-lettered messages.
const (
	HeaderError           = "walkstage-error"
	HeaderReason          = "walkstage-reason"
	HeaderSourceTopic     = "walkstage-source-topic"
	HeaderSourcePartition = "walkstage-source-partition"
	HeaderSourceOffset    = "walkstage-source-offset"
)

// DeadLetter copies the original message (key, value and headers
// unchanged) to the dead-letter topic with headers saying why, and returns
// once the copy is durable. It does not commit.
func (d *Delivery) DeadLetter(ctx context.Context, reason, cause string) error {
	m := d.msg
	hs := append(append([]kafka.Header(nil), m.Headers...),
		kafka.Header{Key: HeaderError, Value: []byte(cause)},
		kafka.Header{Key: HeaderReason, Value: []byte(reason)},
		kafka.Header{Key: HeaderSourceTopic, Value: []byte(m.Topic)},
		kafka.Header{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(m.Partition))},
		kafka.Header{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
	)
	err := d.c.dlq.WriteMessages(ctx, kafka.Message{Key: m.Key, Value: m.Value, Headers: hs})
	if err != nil {
		return fmt.Errorf("dead-letter batch %q to %s: %w", d.BatchID(), d.c.dlq.Topic, err)
	}
	return nil
}
