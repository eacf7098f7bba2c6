package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const chaosIDHeader = "chaos-id"

func newClient(broker string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(broker),
		// The 15 MiB bad messages must fit in one produce and one fetch.
		kgo.ProducerBatchMaxBytes(24 << 20), kgo.BrokerMaxWriteBytes(64 << 20), kgo.BrokerMaxReadBytes(128 << 20),
		kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(32 << 20), kgo.FetchMaxWait(200 * time.Millisecond),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20), kgo.ProduceRequestTimeout(20 * time.Second),
	}, opts...)...)
}

// produce sends ms to the input topic, in order, and records where each
// landed.
func produce(ctx context.Context, cl *kgo.Client, ms []*msg) error {
	if len(ms) == 0 {
		return nil
	}
	recs := make([]*kgo.Record, len(ms))
	for i, m := range ms {
		recs[i] = &kgo.Record{Topic: "in", Key: m.key, Value: m.value,
			Headers: append([]kgo.RecordHeader{{Key: chaosIDHeader, Value: []byte(m.id)}}, m.headers...)}
	}
	// ProduceSync lists results in the order they complete, not in the
	// order given: read the records themselves, which it fills in.
	byRec := map[*kgo.Record]*msg{}
	for i, r := range recs {
		byRec[r] = ms[i]
	}
	for _, r := range cl.ProduceSync(ctx, recs...) {
		if m := byRec[r.Record]; r.Err != nil {
			return fmt.Errorf("produce %s (%s, %d bytes): %w", m.id, m.category, len(m.value), r.Err)
		}
	}
	for i, r := range recs {
		ms[i].partition, ms[i].offset, ms[i].produced = r.Partition, r.Offset, r.Timestamp
	}
	return nil
}

// Topic limits as a production cluster has them: Kafka's default
// max.message.bytes (1 MiB and a batch header) on the completions and
// dead-letter topics, so whatever the stage derives from a message must fit
// there. The input topic keeps the broker's larger limit: the suite sends
// records of up to 15 MiB on purpose.
var topicConfigs = map[string]map[string]string{
	"in":  nil,
	"out": {"max.message.bytes": "1048588"},
	"dlq": {"max.message.bytes": "1048588"},
}

// createTopics creates topics with their topicConfigs and partitions
// partitions each, as an operator's provisioning job would, and waits until
// every one is in the metadata. A topic that exists already is an error.
func createTopics(ctx context.Context, cl *kgo.Client, partitions int, topics ...string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	for _, name := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, int32(partitions), 1
		for _, k := range sortedKeys(topicConfigs[name]) {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(topicConfigs[name][k])
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return fmt.Errorf("create topic %s: %w", rt.Topic, err)
		}
	}
	return waitTopics(ctx, cl, true, topics...)
}

// deleteTopics deletes topics and waits until the metadata no longer lists
// them.
func deleteTopics(ctx context.Context, cl *kgo.Client, topics ...string) error {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	for _, name := range topics {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		req.TopicNames = append(req.TopicNames, name)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return fmt.Errorf("delete topic %s: %w", deref(rt.Topic), err)
		}
	}
	return waitTopics(ctx, cl, false, topics...)
}

// waitTopics waits until each of topics exists (or, with exist false, none
// does) with all its partitions led.
func waitTopics(ctx context.Context, cl *kgo.Client, exist bool, topics ...string) error {
	for {
		req := kmsg.NewPtrMetadataRequest()
		for _, name := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(name)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			n := 0
			for _, rt := range resp.Topics {
				ok := kerr.ErrorForCode(rt.ErrorCode) == nil && len(rt.Partitions) > 0
				for _, p := range rt.Partitions {
					ok = ok && p.ErrorCode == 0 && p.Leader >= 0
				}
				if ok {
					n++
				}
			}
			if (exist && n == len(topics)) || (!exist && n == 0) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for topics %v (exist: %v): %w (last error: %v)", topics, exist, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// endOffsets returns the high watermark of each partition of topic.
func endOffsets(ctx context.Context, cl *kgo.Client, topic string, partitions int) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
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
	if len(out) != partitions {
		return nil, fmt.Errorf("list offsets %s: %d of %d partitions answered", topic, len(out), partitions)
	}
	return out, nil
}

// committedOffsets returns the group's committed offset per partition of
// topic (-1: none).
func committedOffsets(ctx context.Context, cl *kgo.Client, group, topic string, partitions int) (map[int32]int64, error) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("offset fetch %s: %w", group, err)
	}
	out := map[int32]int64{}
	for p := range int32(partitions) {
		out[p] = -1
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = p.Offset
		}
	}
	for _, g := range resp.Groups { // v8+ answers per group
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, nil
}

// lag is how many input messages the stage's group has not committed.
func lag(ctx context.Context, cl *kgo.Client, partitions int) (int64, error) {
	end, err := endOffsets(ctx, cl, "in", partitions)
	if err != nil {
		return 0, err
	}
	com, err := committedOffsets(ctx, cl, "stage", "in", partitions)
	if err != nil {
		return 0, err
	}
	var n int64
	for p, e := range end {
		n += e - max(0, com[p])
	}
	return n, nil
}

// topicReader reads a whole topic from the start, incrementally. A topic
// whose log is lost (broker restarted empty, topic recreated) is read again
// from its new start after reset; what was read before is kept, and gens
// says in which generation of the log each record was read.
type topicReader struct {
	cl         *kgo.Client
	admin      *kgo.Client
	broker     string
	topic      string
	partitions int
	next       map[int32]int64
	recs       []*kgo.Record
	gens       []int // parallel to recs
	gen        int
}

func newTopicReader(broker, topic string, partitions int, admin *kgo.Client) (*topicReader, error) {
	r := &topicReader{admin: admin, broker: broker, topic: topic, partitions: partitions}
	return r, r.reset(r.gen)
}

// reset starts reading generation gen of the topic from its beginning.
func (r *topicReader) reset(gen int) error {
	if r.cl != nil {
		r.cl.Close()
	}
	cl, err := newClient(r.broker, kgo.ConsumeTopics(r.topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	r.cl, r.next, r.gen = cl, map[int32]int64{}, gen
	return nil
}

func (r *topicReader) Close() { r.cl.Close() }

// catchUp reads until every partition is read up to its end offset as of
// the call.
func (r *topicReader) catchUp(ctx context.Context) error {
	end, err := endOffsets(ctx, r.admin, r.topic, r.partitions)
	if err != nil {
		return err
	}
	for {
		done := true
		for p, e := range end {
			if r.next[p] < e {
				done = false
			}
		}
		if done {
			return nil
		}
		fs := r.cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: %w", r.topic, err)
		}
		fs.EachRecord(func(rec *kgo.Record) {
			r.recs = append(r.recs, rec)
			r.gens = append(r.gens, r.gen)
			r.next[rec.Partition] = rec.Offset + 1
		})
	}
}

func header(rec *kgo.Record, key string) (string, bool) {
	for _, h := range rec.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}
