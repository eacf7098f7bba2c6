package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
)

// newProducer is a client that produces with acks=all and no linger: a
// request is on the broker, durably, when Produce returns.
func newProducer(brokers []string) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(16<<20), kgo.RecordRetries(10), kgo.ProduceRequestTimeout(20*time.Second))
	if err != nil {
		return nil, fmt.Errorf("producer for %v: %w", brokers, err)
	}
	return cl, nil
}

// arrival is one record read from the event or the dead-letter topic.
type arrival struct {
	at    time.Time // when this process read it
	ev    message.Event
	dead  bool   // a dead letter: key and reason below
	key   string // the record's key (the batch id)
	cause string // dead letters: the walkstage-error header
}

// watcher reads the event and dead-letter topics from their ends as they
// were when it started, so it sees only what is published after.
type watcher struct {
	cl   *kgo.Client
	out  chan arrival
	errc chan error
}

// watch starts reading eventTopic and dlqTopic from their current ends.
func watch(ctx context.Context, brokers []string, eventTopic, dlqTopic string) (*watcher, error) {
	meta, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("client for %v: %w", brokers, err)
	}
	defer meta.Close()
	starts := map[string]map[int32]kgo.Offset{}
	for _, t := range []string{eventTopic, dlqTopic} {
		ends, err := endOffsets(ctx, meta, t)
		if err != nil {
			return nil, err
		}
		starts[t] = map[int32]kgo.Offset{}
		for p, o := range ends {
			starts[t][p] = kgo.NewOffset().At(o)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(starts),
		kgo.FetchMaxWait(500*time.Millisecond), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return nil, fmt.Errorf("consumer for %v: %w", brokers, err)
	}
	w := &watcher{cl: cl, out: make(chan arrival, 4096), errc: make(chan error, 1)}
	go w.loop(ctx, eventTopic)
	return w, nil
}

func (w *watcher) loop(ctx context.Context, eventTopic string) {
	defer close(w.out)
	for {
		fs := w.cl.PollFetches(ctx)
		at := time.Now()
		if ctx.Err() != nil || fs.IsClientClosed() {
			return
		}
		var errs []error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Errorf("fetch %s/%d: %w", t, p, err))
			}
		})
		if len(errs) > 0 {
			w.errc <- errors.Join(errs...)
			return
		}
		for it := fs.RecordIter(); !it.Done(); {
			r := it.Next()
			a := arrival{at: at, key: string(r.Key)}
			if r.Topic == eventTopic {
				if err := json.Unmarshal(r.Value, &a.ev); err != nil {
					w.errc <- fmt.Errorf("event at %s/%d@%d does not decode: %w: %.200q", r.Topic, r.Partition, r.Offset, err, r.Value)
					return
				}
			} else {
				a.dead = true
				var reason, msg string
				for _, h := range r.Headers {
					switch h.Key {
					case source.HeaderReason:
						reason = string(h.Value)
					case source.HeaderError:
						msg = string(h.Value)
					}
				}
				a.cause = reason + ": " + msg
			}
			select {
			case w.out <- a:
			case <-ctx.Done():
				return
			}
		}
	}
}

func (w *watcher) Close() { w.cl.Close() }

// endOffsets returns the high watermark of every partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string) (map[int32]int64, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	mresp, err := mreq.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("metadata of %s: %w", topic, err)
	}
	if len(mresp.Topics) != 1 {
		return nil, fmt.Errorf("metadata of %s: %d topics answered", topic, len(mresp.Topics))
	}
	if err := kerr.ErrorForCode(mresp.Topics[0].ErrorCode); err != nil {
		return nil, fmt.Errorf("metadata of %s (does the topic exist?): %w", topic, err)
	}
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, p := range mresp.Topics[0].Partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p.Partition, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := map[int32]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return nil, fmt.Errorf("list offsets %s/%d: %w", topic, p.Partition, err)
			}
			out[p.Partition] = p.Offset
		}
	}
	if len(out) != len(mresp.Topics[0].Partitions) || len(out) == 0 {
		return nil, fmt.Errorf("list offsets of %s: %d of %d partitions answered", topic, len(out), len(mresp.Topics[0].Partitions))
	}
	return out, nil
}

// produce sends records to topic and returns once the broker holds them all.
func produce(ctx context.Context, cl *kgo.Client, topic string, keys []string, bodies [][]byte) error {
	recs := make([]*kgo.Record, len(keys))
	for i := range keys {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(keys[i]), Value: bodies[i]}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d requests to %s: %w", len(recs), topic, err)
	}
	return nil
}

// failure describes an arrival that fails the run: a dead letter or an event
// other than succeeded.
func failure(a arrival) error {
	if a.dead {
		return fmt.Errorf("dead letter for key %q: %s", a.key, strings.TrimSpace(a.cause))
	}
	if a.ev.Status != message.StatusSucceeded {
		return fmt.Errorf("batch %s %s: %s: %s", a.ev.BatchID, a.ev.Status, a.ev.Reason, a.ev.Error)
	}
	return nil
}
