package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
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
// writer tries twice on its own; callers bound each call with a deadline and
// retry with back-off themselves, so a message whose call gave up is not
// sent again much later by the writer's internal retries.
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
	w       *kafka.Writer
	timeout time.Duration
}

// NewPublisher returns a publisher for topic. Each Publish is bounded by
// callTimeout (10 s when 0).
func NewPublisher(o KafkaOptions, topic string, callTimeout time.Duration) (*Publisher, error) {
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	if topic == "" {
		return nil, errors.New("publisher: no topic")
	}
	w, err := newWriter(o, topic, 0)
	if err != nil {
		return nil, fmt.Errorf("publisher: %w", err)
	}
	if callTimeout <= 0 {
		callTimeout = 10 * time.Second
	}
	return &Publisher{w: w, timeout: callTimeout}, nil
}

// Publish writes ev (key = batch id) and returns once the brokers hold it
// durably, or the error.
func (p *Publisher) Publish(ctx context.Context, ev Event) error {
	if ev.Version == 0 {
		ev.Version = EventVersion
	}
	if ev.CompletedAt.IsZero() {
		ev.CompletedAt = time.Now().UTC()
	}
	v, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event for batch %s: %w", ev.BatchID, err)
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.w.WriteMessages(ctx, kafka.Message{Key: []byte(ev.BatchID), Value: v}); err != nil {
		return fmt.Errorf("publish %s event for batch %s to %s: %w", ev.Status, ev.BatchID, p.w.Topic, err)
	}
	return nil
}

// Close flushes and closes the producer.
func (p *Publisher) Close() error { return p.w.Close() }
