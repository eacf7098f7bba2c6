package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	"go.opentelemetry.io/otel/propagation"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/ctxsleep"
	"github.com/walkstage/walkstage/message"
)

// ConsumerConfig configures a Consumer.
type ConsumerConfig struct {
	Kafka    KafkaOptions
	Topic    string // input topic
	Group    string // consumer group id
	DLQTopic string // rejected messages are copied here
	// OutputTopic, when set, is checked with the others by CheckTopics and
	// Ping (the completion events' topic).
	OutputTopic string
	// CallTimeout bounds every produce and metadata call (default 10 s): a
	// broker that does not answer is an error, not a stall.
	CallTimeout time.Duration
	// DLQIndexWindow is how many of the last records of each dead-letter
	// partition are read at start-up to learn which input records already
	// have a copy (default 10,000): a rejection redelivered after a kill or
	// a rebalance is then not copied again.
	DLQIndexWindow int64
	// MetadataInterval is how often the consumer checks that the group
	// reads every partition of the input topic (a topic created or grown
	// after the start) and that no partition's log was replaced (default 5 s).
	MetadataInterval time.Duration
	SessionTimeout   time.Duration
	RebalanceTimeout time.Duration
	Limits           message.Limits
	// Graph resolves seed ids and checks algorithms against the graph's
	// weights and labels.
	Graph  *graph.Graph
	Logger *slog.Logger
}

// Consumer reads requests from the input topic as a member of a consumer
// group and commits each partition's offsets in order, only as far as every
// earlier message of that partition has been acknowledged.
type Consumer struct {
	cg  *kafka.ConsumerGroup
	dlq *kafka.Writer
	gmu sync.RWMutex // SetGraph waits for decodes using the old graph
	g   *graph.Graph
	lim message.Limits
	log *slog.Logger
	trk *tracker
	// topics checks the stage's topics (start-up, health probe).
	topics *topicChecker
	// marksMu guards marks: per input partition, the last record handed
	// on, kept across generations (sameLog).
	marksMu sync.Mutex
	marks   map[int]recordMark
	// dlqIdx knows which input records already have a dead-letter copy.
	dlqIdx *dlqIndex
	// uncertain holds the records whose last dead-letter write failed:
	// it may have landed all the same, so a retry first syncs the index.
	uncertainMu sync.Mutex
	uncertain   map[srcRef]bool
	// inflight holds the records a dead-letter write is under way for,
	// closed when it ends: a second delivery of one waits for it.
	inflight map[srcRef]chan struct{}
	// dlqMax is the largest record the dead-letter topic takes, from its
	// max.message.bytes once CheckTopics has read it.
	dlqMax      atomic.Int64
	callTimeout time.Duration
	stop        chan struct{}
	wg          sync.WaitGroup

	// commitSem serialises commits so they reach the broker in the order
	// the tracker produced them; a later commit never carries a lower
	// offset. A channel, so that waiting for it can end with a context.
	commitSem chan struct{}
	joined    atomic.Bool
	lagMu     sync.Mutex
	lag       map[tp]int64 // per partition: high watermark - next offset, as of the last fetch
	// delivered is, per partition, the offset after the last record Next
	// handed out. The end check counts lag from it rather than from the
	// reader's position, which is stored only after the record is queued
	// and so can trail a delivery.
	delivered map[tp]int64
	closed    sync.Once

	// What the group and its partition readers need (group.go).
	topic, group     string
	brokers          []string
	dialer           *kafka.Dialer
	maxBytes         int
	metadataInterval time.Duration
	kafkaLog         kafka.Logger
	kafkaErrLog      kafka.Logger
	fetchErrs        *onceLogger
	msgs             chan fetched
	cancel           context.CancelFunc
	genMu            sync.Mutex
	gen              *kafka.Generation
	readers          map[int]*partReader // this generation's partitions
	genChanged       chan struct{}       // closed when a generation begins
	assignMu         sync.Mutex
	assignErr        error
	unassigned       int
	resets           atomic.Int64
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
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = 10 * time.Second
	}
	if cfg.MetadataInterval <= 0 {
		cfg.MetadataInterval = 5 * time.Second
	}
	maxBytes := max(10<<20, 2*cfg.Limits.MaxMessageBytes)
	log := cfg.Logger.With("topic", cfg.Topic, "group", cfg.Group)
	fetchErrs := newOnceLogger(log, 30*time.Second)
	kafkaLog := kafka.LoggerFunc(func(f string, a ...any) { log.Debug(fmt.Sprintf(f, a...)) })
	kafkaErrLog := kafka.LoggerFunc(func(f string, a ...any) { fetchErrs.print(fmt.Sprintf(f, a...)) })
	cg, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:      cfg.Group,
		Brokers: cfg.Kafka.Brokers,
		Dialer:  d,
		Topics:  []string{cfg.Topic},
		// A new group starts at the oldest retained request: requests
		// published before the first replica started must not be lost.
		// (group.go tells this apart from an offset: it is negative.)
		StartOffset:       kafka.FirstOffset,
		SessionTimeout:    cfg.SessionTimeout,
		RebalanceTimeout:  cfg.RebalanceTimeout,
		HeartbeatInterval: max(cfg.SessionTimeout/10, 100*time.Millisecond),
		JoinGroupBackoff:  time.Second,
		// kafka-go's own partition watcher misses a topic created while
		// the group is assigned (see group.go); watchGeneration checks
		// the group's assignment itself.
		WatchPartitionChanges: false,
		Logger:                kafkaLog,
		ErrorLogger:           kafkaErrLog,
	})
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	// The dead-letter writer must take what the stage reads: a rejected
	// request of any accepted size is copied whole where the topic allows
	// it (kafka-go refuses a record above BatchBytes on the client side).
	dlq, err := newWriter(cfg.Kafka, cfg.DLQTopic, int64(maxBytes)+1<<20)
	if err != nil {
		cg.Close()
		return nil, fmt.Errorf("consumer: %w", err)
	}
	// One record per produce batch: the topic's limit applies to a batch,
	// and two dead letters that each fit must not be refused together.
	dlq.BatchSize = 1
	// One attempt: the writer's own retry runs in its background goroutine
	// whatever the caller's deadline, after its 10 s write timeout, so a
	// produce a stalled broker (SIGSTOP) holds is sent again and both land
	// when it resumes (CI's chaos run, seed 1795954814822594517: a
	// rejection copied at +38.3 s and +48.4 s around a 10 s stop).
	// deadLetter retries itself, reading the topic first (uncertain).
	dlq.MaxAttempts = 1
	topics := []string{cfg.Topic, cfg.DLQTopic}
	if cfg.OutputTopic != "" {
		topics = append(topics, cfg.OutputTopic)
	}
	tc, err := newTopicChecker(cfg.Kafka, cfg.CallTimeout, topics...)
	if err != nil {
		cg.Close()
		dlq.Close()
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if cfg.DLQIndexWindow <= 0 {
		cfg.DLQIndexWindow = 10_000
	}
	idx, err := startDLQIndex(cfg.Kafka, cfg.DLQTopic, cfg.DLQIndexWindow, log)
	if err != nil {
		cg.Close()
		dlq.Close()
		return nil, fmt.Errorf("consumer: %w", err)
	}
	c := &Consumer{cg: cg, dlq: dlq, g: cfg.Graph, lim: cfg.Limits, log: log, trk: newTracker(), stop: make(chan struct{}),
		lag: map[tp]int64{}, delivered: map[tp]int64{}, topics: tc, callTimeout: cfg.CallTimeout, dlqIdx: idx, uncertain: map[srcRef]bool{}, inflight: map[srcRef]chan struct{}{},
		topic: cfg.Topic, group: cfg.Group, brokers: cfg.Kafka.Brokers, dialer: d, maxBytes: maxBytes,
		metadataInterval: cfg.MetadataInterval, kafkaLog: kafkaLog, kafkaErrLog: kafkaErrLog, fetchErrs: fetchErrs,
		msgs: make(chan fetched), genChanged: make(chan struct{}), commitSem: make(chan struct{}, 1)}
	// Until CheckTopics reads the topic's limit, assume Kafka's default
	// (1 MiB): a larger copy becomes a stub rather than a refusal.
	c.dlqMax.Store(defaultMaxMessageBytes)
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.wg.Add(1)
	go c.runGroup(ctx)
	return c, nil
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
// validation is still a delivery (Reject set): the caller reports it and
// acknowledges it with its RejectError, which dead-letters and commits it.
// The error is the reader's: ctx cancelled, the reader closed (ErrClosed), or
// a fetch error the caller should treat as the broker being unavailable.
func (c *Consumer) Next(ctx context.Context) (*Delivery, error) {
	var f fetched
	for {
		select {
		case f = <-c.msgs:
		case <-ctx.Done():
			return nil, fmt.Errorf("fetch from %s: %w", c.topic, ctx.Err())
		case <-c.stop:
			return nil, fmt.Errorf("fetch from %s: %w", c.topic, ErrClosed)
		}
		if f.err != nil {
			return nil, fmt.Errorf("fetch from %s: %w", c.topic, f.err)
		}
		// A record fetched before its partition's log was found replaced
		// is of the old log: not delivered.
		if c.trk.fetched(f.m.Topic, f.m.Partition, f.m.Offset, f.epoch) {
			break
		}
	}
	m, epoch := f.m, f.epoch
	c.lagMu.Lock()
	c.lag[tp{m.Topic, m.Partition}] = max(0, m.HighWaterMark-m.Offset-1)
	c.delivered[tp{m.Topic, m.Partition}] = m.Offset + 1
	c.lagMu.Unlock()
	c.joined.Store(true) // a group reader fetches only once it has an assignment
	d := &Delivery{Received: time.Now(), Trace: traceOf(m.Headers)}
	c.gmu.RLock()
	req, err := message.DecodeRequest(m.Key, m.Value, c.g, c.lim)
	c.gmu.RUnlock()
	if err != nil {
		var re *message.RejectError
		if !errors.As(err, &re) {
			re = &message.RejectError{Reason: message.ReasonMalformed, BatchID: message.BoundID(string(m.Key)), Msg: err.Error()}
		}
		d.Reject = re
	} else {
		d.Request = req
	}
	var acked atomic.Bool
	d.Ack = func(ctx context.Context, cause error) error {
		if cause != nil {
			var re *message.RejectError
			if !errors.As(cause, &re) {
				// Only a request error may end a delivery early; anything
				// else leaves it to be redelivered.
				return fmt.Errorf("acknowledge batch %q: %w is not a request error; not committing", d.BatchID(), cause)
			}
			if err := c.deadLetter(ctx, m, d.BatchID(), string(re.Reason), re.Msg); err != nil {
				return err
			}
		}
		if acked.Swap(true) {
			return nil
		}
		return c.commit(ctx, m, epoch, d.BatchID())
	}
	return d, nil
}

// SetGraph makes later requests resolve against g (a new graph version).
// It returns once no decode uses the previous graph, which the caller may
// then release.
func (c *Consumer) SetGraph(g *graph.Graph) {
	c.gmu.Lock()
	c.g = g
	c.gmu.Unlock()
}

// ErrClosed is Next's error once the consumer is closed.
var ErrClosed = errors.New("consumer closed")

// Ping asks the brokers for the metadata of the consumer's topics within
// ctx: it is the broker's health probe. It fails when no broker answers, and
// when a topic is missing.
func (c *Consumer) Ping(ctx context.Context) error {
	_, err := c.topics.check(ctx)
	return err
}

// CheckTopics verifies at start-up that the input, output and dead-letter
// topics exist and reads the dead-letter topic's max.message.bytes, so
// that a copy too large for it is replaced by a stub before it is refused.
// A dead-letter or output topic that takes less than MinTopicRecordBytes is
// a configuration error.
// It returns the topics' problems in one error, naming each topic.
func (c *Consumer) CheckTopics(ctx context.Context) error {
	limits, err := c.topics.check(ctx)
	if err != nil {
		return err
	}
	if v, ok := limits[c.dlq.Topic]; ok && v > 0 {
		c.dlqMax.Store(int64(v))
	}
	// Every dead letter and event has a bounded smallest form; a topic
	// that does not take even that would refuse some of them forever.
	var problems []error
	for _, name := range c.topics.topics[1:] { // the dead-letter and completions topics
		if v := limits[name]; v > 0 && v < MinTopicRecordBytes {
			problems = append(problems, fmt.Errorf("topic %q takes records up to %d bytes (max.message.bytes); walkstage needs at least %d",
				name, v, MinTopicRecordBytes))
		}
	}
	return errors.Join(problems...)
}

// Close leaves the group and closes the connections. Uncommitted messages
// are redelivered to the group.
func (c *Consumer) Close() error {
	var err error
	c.closed.Do(func() {
		close(c.stop)
		// Closing the group ends the generation, and with it the
		// partition readers, and leaves the group.
		err = c.cg.Close()
		c.cancel()
		c.wg.Wait()
		c.dlqIdx.close()
		err = errors.Join(err, c.dlq.Close())
	})
	return err
}

// Delivery is one fetched message: a valid Request, or a Reject saying why
// not. Exactly one of the two is set. The stage owns it from Next on and
// ends it with Ack; no other package sees offsets or Kafka types.
type Delivery struct {
	Request  *message.Request
	Reject   *message.RejectError
	Received time.Time
	// Trace is the record's W3C trace context (traceparent, tracestate),
	// nil when it has none: the parent of the stage's spans for it. Its
	// completion event and dead letter carry the context of the ctx they
	// are published with instead.
	Trace propagation.MapCarrier
	// Ack ends the delivery once its outcome is durable. A nil error means
	// the batch is done (output and completion event written): its offset
	// is committed. A request error (an error wrapping *RejectError, whose
	// completion event the caller has already published) copies the message
	// to the dead-letter topic with its reason, then commits. Any other
	// error is refused: infrastructure trouble is never the request's fault,
	// so such a delivery is simply not acknowledged and comes back. An
	// error from Ack is the broker's (the dead-letter write failed); the
	// caller retries. Commit failures are not returned: the partition's
	// next acknowledgement retries the commit, and at worst the message is
	// redelivered.
	Ack func(ctx context.Context, err error) error
}

// BatchID is the request's batch id, or for a rejection what could be read
// of it (maybe empty).
func (d *Delivery) BatchID() string {
	if d.Request != nil {
		return d.Request.BatchID
	}
	return d.Reject.BatchID
}

// commit acknowledges m. The partition's offset advances past it as soon
// as every earlier message of the partition is acknowledged too; until then
// the commit is deferred (and made by the call that closes the gap).
func (c *Consumer) commit(ctx context.Context, m kafka.Message, epoch uint64, batchID string) error {
	if _, ok := c.trk.ack(m.Topic, m.Partition, m.Offset, epoch); !ok {
		return nil
	}
	// The commit waits for the group's current generation, so a rebalance
	// that never settles could hold every later commit behind commitSem:
	// bound it. A commit that times out is retried by the partition's next
	// acknowledgement, and at worst the batch is redelivered and its output
	// found complete.
	cctx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	select {
	case c.commitSem <- struct{}{}:
	case <-cctx.Done():
		c.log.Warn("offset commit waited too long for the previous one; a later acknowledgement retries it",
			"partition", m.Partition, "batch_id", batchID)
		return nil
	}
	defer func() { <-c.commitSem }()
	// Acknowledgements that came in while this one waited may have moved
	// the commit point further (or a reset made it moot).
	off, ok := c.trk.point(m.Topic, m.Partition, epoch)
	if !ok {
		return nil
	}
	// An offset past the log's end would make the group skip the records
	// the log receives up to it: the log was replaced since the fetch. The
	// partition's reader checks its log again and starts a new epoch.
	_, last, err := c.topics.bounds(cctx, m.Topic, m.Partition)
	if err == nil && off+1 > last {
		c.log.Warn("not committing past the input partition's log end; checking whether its log was replaced",
			"partition", m.Partition, "offset", off+1, "log_end", last, "batch_id", batchID)
		c.recheck(m.Partition)
		return nil
	}
	if err == nil {
		err = c.commitOffset(cctx, m.Partition, off+1)
	}
	if errors.Is(err, errRevoked) {
		// The partition's new owner reads it again from the group's offset.
		c.log.Debug("partition revoked: its new owner commits it", "partition", m.Partition, "offset", off+1)
		return nil
	}
	if err != nil {
		// Nothing is marked committed: the next acknowledgement on this
		// partition retries up to its own point, which includes this one.
		c.log.Warn("offset commit failed; a later acknowledgement retries it",
			"partition", m.Partition, "offset", off, "batch_id", batchID, "err", err)
		return nil
	}
	c.trk.committed(m.Topic, m.Partition, off, epoch)
	return nil
}

// recheck makes the partition's reader check its position against the
// log again.
func (c *Consumer) recheck(part int) {
	c.genMu.Lock()
	pr := c.readers[part]
	c.genMu.Unlock()
	if pr != nil {
		pr.requestRecheck()
	}
}

const commitTimeout = 30 * time.Second

// defaultMaxMessageBytes is Kafka's default max.message.bytes.
const defaultMaxMessageBytes = 1048588

// Header names on dead-lettered messages.
const (
	HeaderError           = "walkstage-error"
	HeaderReason          = "walkstage-reason"
	HeaderSourceTopic     = "walkstage-source-topic"
	HeaderSourcePartition = "walkstage-source-partition"
	HeaderSourceOffset    = "walkstage-source-offset"
	// HeaderSourceTimestamp is the source record's timestamp in Unix
	// milliseconds (-1 when it has none): with the offset it names the
	// record across a log that was replaced and reuses offsets.
	HeaderSourceTimestamp = "walkstage-source-timestamp"
)

// recordTime is m's timestamp in Unix milliseconds, -1 when it has none.
func recordTime(m kafka.Message) int64 {
	if m.Time.IsZero() || m.Time.UnixMilli() < 0 {
		return -1
	}
	return m.Time.UnixMilli()
}

// HeaderTruncated, on a dead-letter copy, gives the size of the original
// value when the copy carries a stub instead (the original record was too
// large for the dead-letter topic; the stub's "cut" says which parts).
const HeaderTruncated = "walkstage-truncated"

// deadLetter copies m (key, value and headers byte for byte, incoming
// walkstage-* headers renamed) to the dead-letter topic after headers saying
// why, and returns once the copy is durable. A copy too large for the topic
// is replaced by a stub within its limit that says what it cut, with the
// original's sizes and SHA-256 (deadLetterRecord): a request error must
// never become an error that stops the stage.
func (c *Consumer) deadLetter(ctx context.Context, m kafka.Message, batchID, reason, cause string) error {
	ref := srcRef{m.Topic, m.Partition, m.Offset, recordTime(m)}
	var uncertain bool
	for {
		c.uncertainMu.Lock()
		ch, busy := c.inflight[ref]
		if !busy {
			ch = make(chan struct{})
			c.inflight[ref] = ch
		}
		uncertain = c.uncertain[ref]
		c.uncertainMu.Unlock()
		if !busy {
			defer func() {
				c.uncertainMu.Lock()
				delete(c.inflight, ref)
				c.uncertainMu.Unlock()
				close(ch)
			}()
			break
		}
		// Another delivery of the same record is dead-lettering it now
		// (redelivered while the first's write still waits on a stalled
		// broker): wait for its outcome instead of writing a copy beside
		// it, which both land when the broker answers.
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("dead-letter batch %q: %w", batchID, ctx.Err())
		}
	}
	// Two tries in this call: a write that failed may have landed (no
	// answer, or a connection cut after the request went out), so the
	// second reads the topic first, as a later delivery would.
	for try := 0; ; try++ {
		err := c.deadLetterOnce(ctx, m, ref, batchID, reason, cause, uncertain)
		if err == nil || try == 1 || ctx.Err() != nil || !errors.Is(err, errWriteFailed) || errors.Is(err, ErrRecordTooLarge) {
			return err
		}
		uncertain = true
	}
}

// errWriteFailed marks deadLetterOnce's write errors: the copy's fate is
// unknown (it may have landed), unlike a failed read of the topic.
var errWriteFailed = errors.New("dead-letter write failed")

// deadLetterOnce is one try of deadLetter for ref: read the topic when an
// earlier try failed (uncertain), then write unless the copy is there.
func (c *Consumer) deadLetterOnce(ctx context.Context, m kafka.Message, ref srcRef, batchID, reason, cause string, uncertain bool) error {
	if uncertain {
		// An earlier attempt failed without an answer and may have
		// landed: read the topic up to its end before deciding.
		if err := c.dlqIdx.sync(ctx, c.callTimeout); err != nil {
			return fmt.Errorf("dead-letter batch %q: %w", batchID, err)
		}
	}
	done, err := c.dlqIdx.has(ctx, ref, c.callTimeout)
	if err != nil {
		return err
	}
	if uncertain && !done {
		// Or it may land still: a produce the broker had not read when it
		// stalled (stopped, paused) is appended when it resumes, possibly
		// after the end the read above asked for on another connection
		// (the chaos suite's broker SIGSTOP once copied a rejection twice
		// that way). Read the topic's end again after a pause.
		if ctxsleep.Sleep(ctx, uncertainSettle) != nil {
			return fmt.Errorf("dead-letter batch %q: %w", batchID, ctx.Err())
		}
		if err := c.dlqIdx.sync(ctx, c.callTimeout); err != nil {
			return fmt.Errorf("dead-letter batch %q: %w", batchID, err)
		}
		if done, err = c.dlqIdx.has(ctx, ref, c.callTimeout); err != nil {
			return err
		}
	}
	if done {
		c.log.Info("rejection already dead-lettered (a redelivery): not copied again", "batch_id", batchID,
			"partition", m.Partition, "offset", m.Offset)
		return nil
	}
	limit := int(min(c.dlqMax.Load(), c.dlq.BatchBytes))
	msg := deadLetterRecord(m, reason, cause, limit)
	msg.Headers = withTrace(ctx, msg.Headers)
	err = c.write(ctx, c.dlq, msg)
	if err != nil && isTooLarge(err) {
		// The topic's real limit is below what it said (or than Kafka's
		// default, where it did not say): a too-large record is refused
		// on every attempt, so send the smallest stub, a few KiB whatever
		// the message, instead of retrying the same record forever.
		c.log.Warn("dead-letter topic refused the copy as too large; sending the smallest stub", "batch_id", message.LogValue(batchID),
			"limit", limit, "bytes", recordBytes(msg), "err", err)
		msg = stubRecord(m, reason, cause, limit, true)
		msg.Headers = withTrace(ctx, msg.Headers)
		err = c.write(ctx, c.dlq, msg)
		if err != nil && isTooLarge(err) {
			err = fmt.Errorf("%w: the dead-letter topic refused a %d-byte stub; its max.message.bytes must be at least %d",
				ErrRecordTooLarge, recordBytes(msg), MinTopicRecordBytes)
		}
	}
	c.uncertainMu.Lock()
	if err != nil {
		c.uncertain[ref] = true
	} else {
		delete(c.uncertain, ref)
	}
	c.uncertainMu.Unlock()
	if err != nil {
		return fmt.Errorf("dead-letter batch %q to %s: %w: %w", batchID, c.dlq.Topic, errWriteFailed, err)
	}
	c.dlqIdx.add(ref)
	return nil
}

// uncertainSettle is how long a dead-letter retry after a write without
// an answer waits before it reads the topic's end a second time. The late
// copy may be the writer's own: kafka-go keeps a message whose call gave
// up in its batch and sends it when the broker answers again, after its
// backoff. One second still let a CI chaos run copy a rejection twice
// (the second copy at the broker's resume); three cost only such retries.
const uncertainSettle = 3 * time.Second

// write produces msgs within the call deadline, so a broker that does not
// answer is an error, not a stall.
func (c *Consumer) write(ctx context.Context, w *kafka.Writer, msgs ...kafka.Message) error {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	return w.WriteMessages(ctx, msgs...)
}
