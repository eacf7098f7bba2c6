package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/walkstage/walkstage/message"
)

// KafkaOptions say how to reach the brokers. They are shared by the
// consumer and the publishers.
type KafkaOptions struct {
	Brokers  []string
	ClientID string
	TLS      *tls.Config // nil: plaintext
	// SASLMechanism is "", "none", "plain", "scram-sha-256" or "scram-sha-512".
	SASLMechanism string
	SASLUsername  string
	SASLPassword  string
}

func (o KafkaOptions) mechanism() (sasl.Mechanism, error) {
	switch strings.ToLower(o.SASLMechanism) {
	case "", "none":
		return nil, nil
	case "plain":
		return plain.Mechanism{Username: o.SASLUsername, Password: o.SASLPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, o.SASLUsername, o.SASLPassword)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, o.SASLUsername, o.SASLPassword)
	}
	return nil, fmt.Errorf("unknown SASL mechanism %q", o.SASLMechanism)
}

func (o KafkaOptions) validate() error {
	if len(o.Brokers) == 0 {
		return errors.New("no brokers")
	}
	_, err := o.mechanism()
	return err
}

func (o KafkaOptions) dialer() (*kafka.Dialer, error) {
	m, err := o.mechanism()
	if err != nil {
		return nil, err
	}
	return &kafka.Dialer{ClientID: o.ClientID, Timeout: 10 * time.Second, DualStack: true, TLS: o.TLS, SASLMechanism: m}, nil
}

func (o KafkaOptions) transport() (*kafka.Transport, error) {
	m, err := o.mechanism()
	if err != nil {
		return nil, err
	}
	return &kafka.Transport{ClientID: o.ClientID, DialTimeout: 10 * time.Second, TLS: o.TLS, SASL: m}, nil
}

// TLSConfig builds a client TLS configuration from PEM files. caFile empty
// means the system roots; certFile and keyFile empty mean no client
// certificate.
func TLSConfig(caFile, certFile, keyFile, serverName string, insecureSkipVerify bool) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: insecureSkipVerify}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("tls ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls ca %s: no PEM certificates", caFile)
		}
		c.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("tls client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// newWriter is a producer that counts a message written only once every
// in-sync replica has it (acks=all), so "written" means durable.
// maxBytes bounds one record (kafka-go's BatchBytes, 1 MiB when 0). The
// writer tries twice on its own, in a goroutine of its own that a caller's
// deadline does not stop: the second attempt follows the first's 10 s
// write timeout even when the call has given up. Writers whose copies must
// be single (the dead-letter topic) set MaxAttempts to 1 and retry
// themselves.
func newWriter(o KafkaOptions, topic string, maxBytes int64) (*kafka.Writer, error) {
	t, err := o.transport()
	if err != nil {
		return nil, err
	}
	return &kafka.Writer{
		Addr:            kafka.TCP(o.Brokers...),
		Topic:           topic,
		Balancer:        &kafka.Hash{}, // by key: one batch id's events stay in order on one partition
		RequiredAcks:    kafka.RequireAll,
		MaxAttempts:     2,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: 250 * time.Millisecond,
		BatchBytes:      maxBytes,
		// Writes are synchronous and latency-bound (the offset commit waits
		// on them); concurrent finishers still share a produce request.
		BatchTimeout: 2 * time.Millisecond,
		BatchSize:    100,
		Transport:    t,
	}, nil
}

// Publisher writes completion events to the output topic.
type Publisher struct {
	o       KafkaOptions
	topic   string
	timeout time.Duration
	tc      *topicChecker
	log     *slog.Logger

	mu sync.Mutex
	w  *kafka.Writer // nil until the topic's limit is known
	// limit is the largest record the topic takes (recordBytes), from its
	// max.message.bytes.
	limit int
	// single stops batching events after the broker refused a record the
	// limit said fits: the limit is wrong or a batch was too large.
	single bool
	old    []*kafka.Writer // replaced writers, closed with the publisher
}

// NewPublisher returns a publisher for topic. Each Publish is bounded by
// callTimeout (10 s when 0). The topic's max.message.bytes is read at the
// first Publish.
func NewPublisher(o KafkaOptions, topic string, callTimeout time.Duration) (*Publisher, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	if topic == "" {
		return nil, errors.New("publisher: no topic")
	}
	if callTimeout <= 0 {
		callTimeout = 10 * time.Second
	}
	tc, err := newTopicChecker(o, callTimeout, topic)
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	return &Publisher{o: o, topic: topic, timeout: callTimeout, tc: tc, log: slog.New(slog.DiscardHandler)}, nil
}

// SetLogger makes the publisher say when the topic refuses an event as too
// large.
func (p *Publisher) SetLogger(l *slog.Logger) { p.log = l }

// writer returns the producer, first reading the topic's limit: its batches
// are held below it, so events that each fit are never refused together.
func (p *Publisher) writer(ctx context.Context) (*kafka.Writer, int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w != nil {
		return p.w, p.limit, nil
	}
	limits, err := p.tc.check(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("publisher: %w", err)
	}
	limit := defaultMaxMessageBytes // the broker did not say (not allowed to describe configs)
	if v := limits[p.topic]; v > 0 {
		limit = v
	}
	// kafka-go counts a message at less than recordBytes and leaves out the
	// batch header: a batch of BatchBytes stays within the limit.
	w, err := newWriter(p.o, p.topic, int64(max(limit-recordOverhead, 1)))
	if err != nil {
		return nil, 0, fmt.Errorf("publisher: %w", err)
	}
	if p.single {
		w.BatchSize = 1
	}
	p.w, p.limit = w, limit
	return w, limit, nil
}

// refused forgets the writer after the broker refused a record as too large
// although it fits the limit read: the next Publish reads the limit again
// (it may have been lowered) and sends each event in a batch of its own.
func (p *Publisher) refused(w *kafka.Writer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.w == w {
		p.old = append(p.old, w)
		p.w, p.single = nil, true
	}
}

// Publish writes ev (key = batch id) and returns once the brokers hold it
// durably, or the error. What ev carries from a request is bounded to fit
// the topic: a batch id longer than MaxDerivedIDBytes is cut (BoundID), the
// error to 4 KiB; an event still too large, or refused as too large, is
// sent in its smallest form (the error cut to 256 bytes, no skipped ids).
// An error wrapping ErrRecordTooLarge means even that does not fit.
func (p *Publisher) Publish(ctx context.Context, ev message.Event) error {
	if ev.Version == 0 {
		ev.Version = message.EventVersion
	}
	if ev.CompletedAt.IsZero() {
		ev.CompletedAt = time.Now().UTC()
	}
	ev.BatchID = message.BoundID(ev.BatchID)
	ev.Error = message.Clip(ev.Error, maxErrorBytes)
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	w, limit, err := p.writer(ctx)
	if err != nil {
		return fmt.Errorf("publish %s event for batch %s: %w", ev.Status, ev.BatchID, err)
	}
	msg, err := eventRecord(ev, false)
	if err != nil {
		return err
	}
	if recordBytes(msg) > limit {
		if msg, err = eventRecord(ev, true); err != nil {
			return err
		}
		if recordBytes(msg) > limit {
			return fmt.Errorf("publish %s event for batch %s to %s: %w (%d bytes, the topic takes %d; its max.message.bytes must be at least %d)",
				ev.Status, ev.BatchID, p.topic, ErrRecordTooLarge, recordBytes(msg), limit, MinTopicRecordBytes)
		}
	}
	msg.Headers = withTrace(ctx, msg.Headers)
	err = w.WriteMessages(ctx, msg)
	if err != nil && isTooLarge(err) {
		if !refusedByClient(err) {
			p.refused(w)
		}
		p.log.Warn("completions topic refused an event as too large; sending its smallest form",
			"topic", p.topic, "batch_id", ev.BatchID, "limit", limit, "bytes", recordBytes(msg), "err", err)
		if w, _, err = p.writer(ctx); err != nil {
			return fmt.Errorf("publish %s event for batch %s: %w", ev.Status, ev.BatchID, err)
		}
		if msg, err = eventRecord(ev, true); err != nil {
			return err
		}
		msg.Headers = withTrace(ctx, msg.Headers)
		err = w.WriteMessages(ctx, msg)
		if err != nil && isTooLarge(err) {
			err = fmt.Errorf("%w (%d bytes; the topic's max.message.bytes must be at least %d)", ErrRecordTooLarge,
				recordBytes(msg), MinTopicRecordBytes)
		}
	}
	if err != nil {
		return fmt.Errorf("publish %s event for batch %s to %s: %w", ev.Status, ev.BatchID, p.topic, err)
	}
	return nil
}

// eventRecord encodes ev, in its smallest form when small.
func eventRecord(ev message.Event, small bool) (kafka.Message, error) {
	if small {
		ev.Error = message.Clip(ev.Error, minErrorBytes)
		ev.Algorithm = message.Clip(ev.Algorithm, minErrorBytes)
		ev.SkippedIDs = nil
	}
	v, err := json.Marshal(ev)
	if err != nil {
		return kafka.Message{}, fmt.Errorf("encode event for batch %s: %w", ev.BatchID, err)
	}
	return kafka.Message{Key: []byte(ev.BatchID), Value: v}, nil
}

// Close flushes and closes the producer.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var errs []error
	for _, w := range append(p.old, p.w) {
		if w != nil {
			errs = append(errs, w.Close())
		}
	}
	return errors.Join(errs...)
}
