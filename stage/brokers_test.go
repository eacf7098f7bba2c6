package stage

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walkstage/walkstage/internal/testpki"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/health"
)

// TestStageOverTLSAndSCRAM runs the whole stage, configured only from its
// environment as in production, against a broker that requires TLS and
// SASL/SCRAM-SHA-512: fetch, event, commit and topic checks all go through
// the authenticated, encrypted connection.
func TestStageOverTLSAndSCRAM(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	caFile, serverTLS, err := testpki.CA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out", "dlq"),
		kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "walker", "s3cret"), kfake.TLS(serverTLS))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	gpath, _ := testGraph(t, 8)
	rt, _ := runStage(t, stageEnviron(brokers, gpath, "file://"+filepath.ToSlash(t.TempDir()), "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_TLS_CA_FILE="+caFile, "WALKSTAGE_SASL_MECHANISM=scram-sha-512", "WALKSTAGE_SASL_USERNAME=walker",
		"WALKSTAGE_SASL_PASSWORD=s3cret"))

	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	clientTLS := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	mech, err := scram.Mechanism(scram.SHA512, "walker", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: "in", RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Transport: &kafka.Transport{TLS: clientTLS, SASL: mech}}
	defer w.Close()
	if err := w.WriteMessages(ctx, requestRaw("sec", `{"version":1,"batch_id":"sec","algorithm":"deepwalk","seeds":[1,2],"length":5}`)); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: brokers, Topic: "out", Partition: 0, MaxWait: 100 * time.Millisecond,
		Dialer: &kafka.Dialer{Timeout: 10 * time.Second, TLS: clientTLS, SASLMechanism: mech}})
	defer r.Close()
	m, err := r.ReadMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ev message.Event
	if err := json.Unmarshal(m.Value, &ev); err != nil || ev.BatchID != "sec" || ev.Status != message.StatusSucceeded || ev.Walks != 2 {
		t.Fatalf("event %s: %v", m.Value, err)
	}
	if err := rt.ready(); err != nil {
		t.Errorf("not ready over TLS+SCRAM: %v", err)
	}
}

// TestMissingTopicFailsReadinessByName: an output topic that does not exist
// is found at start-up, named in /readyz, and nothing is fetched until an
// operator creates it; then the stage becomes ready by itself and works.
func TestMissingTopicFailsReadinessByName(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	gpath, _ := testGraph(t, 8)
	rt, _ := runStage(t, stageEnviron(brokers, gpath, "file://"+filepath.ToSlash(t.TempDir()), "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_PROBE_INTERVAL=100ms"))
	produce(t, brokers, "in", requestRaw("late", `{"version":1,"batch_id":"late","algorithm":"deepwalk","seeds":[1],"length":3}`))
	err = rt.ready()
	if err == nil || !strings.Contains(err.Error(), `topic "out" does not exist`) {
		t.Fatalf("readiness with the output topic missing: %v", err)
	}
	time.Sleep(time.Second)
	if n := rt.Consumer.Pending(); n != 0 {
		t.Fatalf("%d messages fetched while a topic was missing", n)
	}
	cl := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	if _, err := cl.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: "out", NumPartitions: 1, ReplicationFactor: 1}}}); err != nil {
		t.Fatal(err)
	}
	obs := newObserver(brokers, "out")
	defer obs.Close()
	if _, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["late"]) > 0 }); err != nil {
		t.Fatal(err)
	}
	if err := rt.ready(); err != nil {
		t.Errorf("still not ready: %v", err)
	}
}

// TestInputTopicCreatedDuringAssignmentIsConsumed: the input topic is
// created just after the group's leader assigned partitions without it.
// Before, the group stayed Stable with nothing assigned until a restart while
// the broker probe, finding every topic, made the stage ready. Now the
// consumer has the group assigned again, the request is walked, and the
// source's metrics are exported.
func TestInputTopicCreatedDuringAssignmentIsConsumed(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out", "dlq"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The first SyncGroup carries an assignment made without the topic:
	// create it before the broker answers.
	c.ControlKey(int16(kmsg.SyncGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.DropControl()
		c.SleepControl(func() {
			if err := c.CreateTopic("in", 2, nil); err != nil {
				t.Error(err)
			}
		})
		return nil, nil, false
	})
	brokers := c.ListenAddrs()
	gpath, _ := testGraph(t, 8)
	rt, _ := runStage(t, stageEnviron(brokers, gpath, "file://"+filepath.ToSlash(t.TempDir()), "WALKSTAGE_METRICS_ADDR=",
		"WALKSTAGE_PROBE_INTERVAL=100ms"))
	for c.TopicInfo("in") == nil {
		if ctx.Err() != nil {
			t.Fatal("the input topic was never created")
		}
		time.Sleep(20 * time.Millisecond)
	}
	produce(t, brokers, "in", requestRaw("late", `{"version":1,"batch_id":"late","algorithm":"deepwalk","seeds":[1],"length":3}`))
	obs := newObserver(brokers, "out")
	defer obs.Close()
	if _, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["late"]) > 0 }); err != nil {
		t.Fatalf("the request on the late topic was never walked: %v", err)
	}
	waitFor(t, "ready", 30*time.Second, func() bool { return rt.ready() == nil })
	mfs, err := rt.Stage.o.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			found[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	for _, name := range []string{"walkstage_source_unassigned_partitions", "walkstage_source_log_resets_total"} {
		if v, ok := found[name]; !ok || v != 0 {
			t.Errorf("%s: %v (exported %v)", name, v, ok)
		}
	}
}

// TestNotReadyWhileInputPartitionsAreUnread: the broker answers and every
// topic exists, but the group reads none of the input topic's partitions
// (a topic created after the assignment): the stage is not ready, and says
// why.
func TestNotReadyWhileInputPartitionsAreUnread(t *testing.T) {
	unread := errors.New(`group "g" reads 0 of input topic "in"'s 2 partitions`)
	var consuming error
	s := &Stage{health: health.New(health.Options{}), o: Options{Joined: func() bool { return true }, Consuming: func() error { return consuming }}}
	if err := s.ready(); err != nil {
		t.Fatalf("ready while consuming: %v", err)
	}
	consuming = unread
	if err := s.ready(); err == nil || !strings.Contains(err.Error(), unread.Error()) {
		t.Fatalf("ready with partitions unread: %v", err)
	}
}
