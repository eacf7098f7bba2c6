package source

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
)

// topicChecker asks the brokers whether the stage's topics exist and how
// large a record each accepts. The stage calls it at start-up (a missing
// topic is a configuration error found before any work, not after the
// first batch is walked and written) and as the broker's health probe.
type topicChecker struct {
	client  *kafka.Client
	topics  []string
	timeout time.Duration
	// poll is client for fetches that wait on the broker (pollWait
	// longer than a call may take).
	poll *kafka.Client
}

// pollWait is how long a fetch waits on the broker for new records. kafka-go
// sets the socket's read deadline from the call's timeout, so the client
// that polls has pollWait more than the call timeout.
const pollWait = 3 * time.Second

func newTopicChecker(o KafkaOptions, timeout time.Duration, topics ...string) (*topicChecker, error) {
	t, err := o.transport()
	if err != nil {
		return nil, err
	}
	addr := kafka.TCP(o.Brokers...)
	return &topicChecker{client: &kafka.Client{Addr: addr, Timeout: timeout, Transport: t},
		poll:   &kafka.Client{Addr: addr, Timeout: timeout + pollWait, Transport: t},
		topics: topics, timeout: timeout}, nil
}

// fetch returns the records of the partition from offset off on, waiting
// up to pollWait for the first one; the broker answers with whole record
// batches up to maxBytes (at least one, whatever its size), so the records
// may start before off (the caller skips them). A log that no longer
// reaches off answers kafka.OffsetOutOfRange.
func (tc *topicChecker) fetch(ctx context.Context, topic string, part int, off int64, maxBytes int) ([]kafka.Message, error) {
	ctx, cancel := context.WithTimeout(ctx, tc.timeout+pollWait)
	defer cancel()
	res, err := tc.poll.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: part, Offset: off,
		MinBytes: 1, MaxBytes: int64(maxBytes), MaxWait: pollWait})
	if err != nil {
		return nil, fmt.Errorf("fetch offset %d of partition %d of %s: %w", off, part, topic, err)
	}
	if res.Error != nil {
		return nil, fmt.Errorf("fetch offset %d of partition %d of %s: %w", off, part, topic, res.Error)
	}
	var out []kafka.Message
	for {
		r, err := res.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			if len(out) > 0 {
				// A batch cut short at maxBytes: what came whole is kept,
				// the rest is fetched again.
				return out, nil
			}
			return nil, fmt.Errorf("fetch offset %d of partition %d of %s: records: %w", off, part, topic, err)
		}
		m := kafka.Message{Topic: topic, Partition: part, Offset: r.Offset, Time: r.Time,
			HighWaterMark: res.HighWatermark}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, kafka.Header{Key: h.Key, Value: h.Value})
		}
		if m.Key, err = readBytes(r.Key); err == nil {
			m.Value, err = readBytes(r.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("fetch offset %d of partition %d of %s: record %d: %w", off, part, topic, r.Offset, err)
		}
		out = append(out, m)
	}
}

// readBytes reads a record's key or value; nil stays nil (a null key).
func readBytes(b kafka.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	defer b.Close()
	return io.ReadAll(b)
}

// check returns each topic's max.message.bytes (0 where the broker does
// not say), or an error naming every missing topic.
func (tc *topicChecker) check(ctx context.Context) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, tc.timeout)
	defer cancel()
	md, err := tc.client.Metadata(ctx, &kafka.MetadataRequest{Topics: tc.topics})
	if err != nil {
		return nil, fmt.Errorf("broker metadata for %s: %w", strings.Join(tc.topics, ", "), err)
	}
	found := map[string]error{}
	for _, t := range md.Topics {
		found[t.Name] = t.Error
	}
	var problems []error
	var present []string
	for _, name := range tc.topics {
		terr, ok := found[name]
		switch {
		case !ok || errors.Is(terr, kafka.UnknownTopicOrPartition):
			problems = append(problems, fmt.Errorf("topic %q does not exist", name))
		case terr != nil:
			problems = append(problems, fmt.Errorf("topic %q: %w", name, terr))
		default:
			present = append(present, name)
		}
	}
	if len(problems) > 0 {
		return nil, errors.Join(problems...)
	}
	limits := map[string]int{}
	res := make([]kafka.DescribeConfigRequestResource, 0, len(present))
	for _, name := range present {
		res = append(res, kafka.DescribeConfigRequestResource{ResourceType: kafka.ResourceTypeTopic, ResourceName: name,
			ConfigNames: []string{"max.message.bytes"}})
	}
	// kafka-go answers Metadata from its own cache, so the metadata above
	// proves nothing about the broker being up; DescribeConfigs always goes
	// to a broker, which makes it the probe's real round trip.
	dc, err := tc.client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: res})
	if err != nil {
		var kerr kafka.Error
		if errors.As(err, &kerr) {
			// The broker answered but refused the request (an old or
			// minimal broker): the limits stay unknown and the dead-letter
			// writer falls back on the broker's refusal.
			return limits, nil
		}
		return nil, fmt.Errorf("broker: describe configs of %s: %w", strings.Join(present, ", "), err)
	}
	for _, r := range dc.Resources {
		for _, e := range r.ConfigEntries {
			if e.ConfigName == "max.message.bytes" {
				if v, err := strconv.Atoi(e.ConfigValue); err == nil {
					limits[r.ResourceName] = v
				}
			}
		}
	}
	return limits, nil
}

// bounds returns the first offset and the end (the high watermark) of one
// partition, asked of its leader.
func (tc *topicChecker) bounds(ctx context.Context, topic string, part int) (first, last int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, tc.timeout)
	defer cancel()
	res, err := tc.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		topic: {kafka.FirstOffsetOf(part), kafka.LastOffsetOf(part)}}})
	if err != nil {
		return 0, 0, fmt.Errorf("list offsets of partition %d of %s: %w", part, topic, err)
	}
	for _, po := range res.Topics[topic] {
		if po.Partition != part {
			continue
		}
		if po.Error != nil {
			return 0, 0, fmt.Errorf("list offsets of partition %d of %s: %w", part, topic, po.Error)
		}
		return po.FirstOffset, po.LastOffset, nil
	}
	return 0, 0, fmt.Errorf("list offsets of partition %d of %s: no answer for it", part, topic)
}

// ends returns the end (the high watermark) of each partition that
// answered.
func (tc *topicChecker) ends(ctx context.Context, topic string, parts ...int) (map[int]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, tc.timeout)
	defer cancel()
	reqs := make([]kafka.OffsetRequest, len(parts))
	for i, p := range parts {
		reqs[i] = kafka.LastOffsetOf(p)
	}
	res, err := tc.client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	out := make(map[int]int64, len(parts))
	for _, po := range res.Topics[topic] {
		if po.Error == nil {
			out[po.Partition] = po.LastOffset
		}
	}
	return out, nil
}

// partitions returns the number of partitions of topic, 0 when it does not
// exist.
func (tc *topicChecker) partitions(ctx context.Context, topic string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, tc.timeout)
	defer cancel()
	md, err := tc.client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return 0, fmt.Errorf("broker metadata for %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if errors.Is(t.Error, kafka.UnknownTopicOrPartition) {
			return 0, nil
		}
		if t.Error != nil {
			return 0, fmt.Errorf("broker metadata for %s: %w", topic, t.Error)
		}
		return len(t.Partitions), nil
	}
	return 0, nil
}

// recordMark names a record of a partition's log well enough to tell it
// from the record a replacement log holds at the same offset: its
// timestamp and a checksum of its key. Kafka's client here does not expose
// topic ids, and offsets alone repeat once a recreated topic has grown past
// the position a reader kept.
type recordMark struct {
	off int64
	ts  int64 // Unix milliseconds, -1 when the record has none
	key uint32
}

func markOf(m kafka.Message) recordMark {
	return recordMark{off: m.Offset, ts: recordTime(m), key: crc32.ChecksumIEEE(m.Key)}
}

// markAt reads the mark of the record at off (ok false when the log no
// longer holds it, e.g. removed by retention).
func (tc *topicChecker) markAt(ctx context.Context, topic string, part int, off int64) (recordMark, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, tc.timeout)
	defer cancel()
	res, err := tc.client.Fetch(ctx, &kafka.FetchRequest{Topic: topic, Partition: part, Offset: off,
		MinBytes: 1, MaxBytes: 1, MaxWait: 100 * time.Millisecond})
	if err != nil {
		return recordMark{}, false, fmt.Errorf("fetch offset %d of partition %d of %s: %w", off, part, topic, err)
	}
	if errors.Is(res.Error, kafka.OffsetOutOfRange) {
		return recordMark{}, false, nil
	}
	if res.Error != nil {
		return recordMark{}, false, fmt.Errorf("fetch offset %d of partition %d of %s: %w", off, part, topic, res.Error)
	}
	// The broker answers from the start of the record batch holding off
	// (at least one batch, whatever MaxBytes says).
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			return recordMark{}, false, nil // nothing at off (yet)
		}
		if r.Offset < off {
			continue
		}
		if r.Offset > off {
			return recordMark{}, false, nil
		}
		m := kafka.Message{Offset: r.Offset, Time: r.Time}
		if r.Key != nil {
			if m.Key, err = io.ReadAll(r.Key); err != nil {
				return recordMark{}, false, fmt.Errorf("fetch offset %d of partition %d of %s: %w", off, part, topic, err)
			}
		}
		return markOf(m), true, nil
	}
}
