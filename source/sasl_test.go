package source

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/walkstage/walkstage/internal/testpki"
	"github.com/walkstage/walkstage/message"
)

// TestAuthenticatedBrokers runs the consumer and publisher against kfake
// with each SASL mechanism the stage offers, over TLS verified with a CA
// file, the way a managed Kafka is reached in production.
func TestAuthenticatedBrokers(t *testing.T) {
	caFile, serverTLS := testCA(t)
	clientTLS, err := TLSConfig(caFile, "", "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, mech := range []string{"plain", "scram-sha-256", "scram-sha-512"} {
		t.Run(mech, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"),
				kfake.EnableSASL(), kfake.Superuser(strings.ToUpper(mech), "walker", "s3cret"), kfake.TLS(serverTLS))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ko := KafkaOptions{Brokers: c.ListenAddrs(), ClientID: "t", TLS: clientTLS, SASLMechanism: mech,
				SASLUsername: "walker", SASLPassword: "s3cret"}
			in, err := newWriter(ko, "in", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()
			if err := in.WriteMessages(ctx, kafka.Message{Key: []byte("b1"), Value: []byte(`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100]}`)}); err != nil {
				t.Fatal(err)
			}
			cons, err := NewConsumer(ConsumerConfig{Kafka: ko, Topic: "in", Group: "g", DLQTopic: "dlq", SessionTimeout: 6 * time.Second,
				Limits: message.DefaultLimits(), Graph: testGraph(t), Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			defer cons.Close()
			d, err := cons.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := NewPublisher(ko, "out", 0)
			if err != nil {
				t.Fatal(err)
			}
			defer pub.Close()
			if err := pub.Publish(ctx, message.Event{BatchID: d.BatchID(), Status: message.StatusSucceeded}); err != nil {
				t.Fatal(err)
			}
			if err := d.Ack(ctx, nil); err != nil {
				t.Fatal(err)
			}
			// Wrong password: the publisher must fail, not hang.
			bad := ko
			bad.SASLPassword = "nope"
			bp, _ := NewPublisher(bad, "out", 0)
			defer bp.Close()
			bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
			defer bcancel()
			if err := bp.Publish(bctx, message.Event{BatchID: "x", Status: message.StatusSucceeded}); err == nil {
				t.Fatal("publish with a wrong password succeeded")
			}
		})
	}
}

// testCA writes a self-signed CA certificate for 127.0.0.1 and returns its
// file and the server's TLS configuration.
func testCA(t *testing.T) (string, *tls.Config) {
	t.Helper()
	f, c, err := testpki.CA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}
