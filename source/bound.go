package source

// Bounds on the records the stage writes about a message. A message may
// carry a key, headers or a value of any size its topic accepts; its
// dead-letter copy and the rejected event go to topics with their own,
// often smaller, limits. Each is bounded here (the batch id and log fields
// with message.BoundID and message.LogValue) so that a message too large
// for them is a request error like any other, never a write the broker
// refuses forever.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/message"
)

// MinTopicRecordBytes is the smallest max.message.bytes the completions and
// dead-letter topics may have: a dead-letter stub and a completion event cut
// to their bounded minimum fit in it, whatever the message was.
const MinTopicRecordBytes = 4096

// maxErrorBytes bounds the error text of an event and of a dead letter's
// walkstage-error header; minErrorBytes is what is left of it in the
// smallest form of either.
const (
	maxErrorBytes = 4096
	minErrorBytes = 256
)

// ErrRecordTooLarge means a record is larger than its topic accepts even in
// its smallest form: the topic's max.message.bytes is below
// MinTopicRecordBytes. Retrying the same record cannot succeed.
var ErrRecordTooLarge = errors.New("record larger than the topic accepts")

// Upper bounds of what a record adds to a produce request's record batch
// (format v2, uncompressed, one record: the batch header, the record's
// varints) and each of its headers; kafka-go's own estimate of a message
// (Writer.BatchBytes) is below both.
const (
	recordOverhead = 160
	headerOverhead = 10
)

// recordBytes is an upper bound of m's size as a record batch of its own,
// the size a broker compares with max.message.bytes.
func recordBytes(m kafka.Message) int {
	n := recordOverhead + len(m.Key) + len(m.Value)
	for _, h := range m.Headers {
		n += headerOverhead + len(h.Key) + len(h.Value)
	}
	return n
}

// ownHeaderPrefix is the stage's header namespace, and renamedPrefix what
// an incoming header in it is renamed to on a dead letter.
const (
	ownHeaderPrefix = "walkstage-"
	renamedPrefix   = "original-"
)

// foreignHeaders returns hs with every header in the stage's namespace
// (walkstage-*, in any case) renamed original-walkstage-*: a producer
// cannot make a dead letter look like it came from another record or for
// another reason, and nothing it sent is lost.
func foreignHeaders(hs []kafka.Header) []kafka.Header {
	out := make([]kafka.Header, len(hs))
	for i, h := range hs {
		if len(h.Key) >= len(ownHeaderPrefix) && strings.EqualFold(h.Key[:len(ownHeaderPrefix)], ownHeaderPrefix) {
			h.Key = renamedPrefix + h.Key
		}
		out[i] = h
	}
	return out
}

// deadLetterRecord is the dead-letter copy of m, rejected for reason
// (cause), within limit bytes (recordBytes). The stage's headers come
// first; then the original headers (foreignHeaders); key and value are the
// original's. When that does not fit, the copy is a stub (stubRecord).
func deadLetterRecord(m kafka.Message, reason, cause string, limit int) kafka.Message {
	full := kafka.Message{Key: m.Key, Value: m.Value,
		Headers: append(ownHeaders(m, reason, message.Clip(cause, maxErrorBytes)), foreignHeaders(m.Headers)...)}
	if recordBytes(full) <= limit {
		return full
	}
	return stubRecord(m, reason, cause, limit, false)
}

func ownHeaders(m kafka.Message, reason, cause string) []kafka.Header {
	return []kafka.Header{
		{Key: HeaderError, Value: []byte(cause)},
		{Key: HeaderReason, Value: []byte(reason)},
		{Key: HeaderSourceTopic, Value: []byte(m.Topic)},
		{Key: HeaderSourcePartition, Value: []byte(strconv.Itoa(m.Partition))},
		{Key: HeaderSourceOffset, Value: []byte(strconv.FormatInt(m.Offset, 10))},
		{Key: HeaderSourceTimestamp, Value: []byte(strconv.FormatInt(recordTime(m), 10))},
	}
}

// stub is the value of a dead letter that could not be a full copy. It
// says where the original is, its parts' sizes and SHA-256, which parts the
// stub does not carry byte for byte, and as much of the value as fits.
type stub struct {
	Note            string   `json:"walkstage_stub"`
	Reason          string   `json:"reason"`
	SourceTopic     string   `json:"source_topic"`
	SourcePartition int      `json:"source_partition"`
	SourceOffset    int64    `json:"source_offset"`
	Bytes           int      `json:"original_bytes"` // of the value (the name predates key and header stubs)
	SHA256          string   `json:"original_sha256"`
	KeyBytes        int      `json:"original_key_bytes"`
	KeySHA256       string   `json:"original_key_sha256"`
	Headers         int      `json:"original_headers"`
	HeaderBytes     int      `json:"original_header_bytes"`
	HeadersKept     int      `json:"headers_kept"`
	Cut             []string `json:"cut"`
	ValueHead       string   `json:"value_head"`
	ValueHeadBytes  int      `json:"value_head_bytes"`
}

// stubRecord is the stub dead letter of m within limit bytes. The stage's
// headers (the error cut to 4 KiB, or to 256 bytes where the limit is
// small) and walkstage-truncated always come; then, while they fit, the
// original key (else BoundID of it), the original headers that fit whole
// (in order, renamed as in foreignHeaders), and the value's first bytes as
// text in value_head. minimal asks for the smallest stub, for a topic that
// refused a record the limit said it takes: no original header and no value
// head, the key only when it is short.
func stubRecord(m kafka.Message, reason, cause string, limit int, minimal bool) kafka.Message {
	minimal = minimal || limit < MinTopicRecordBytes
	errText := message.Clip(cause, maxErrorBytes)
	if minimal || limit < 4*maxErrorBytes {
		errText = message.Clip(cause, minErrorBytes)
	}
	vs, ks := sha256.Sum256(m.Value), sha256.Sum256(m.Key)
	doc := stub{
		Note: fmt.Sprintf("the original record does not fit the dead-letter topic (max %d bytes); it stays in the "+
			"source topic at the partition and offset given until retention removes it", limit),
		Reason: reason, SourceTopic: m.Topic, SourcePartition: m.Partition, SourceOffset: m.Offset,
		Bytes: len(m.Value), SHA256: hex.EncodeToString(vs[:]), KeyBytes: len(m.Key), KeySHA256: hex.EncodeToString(ks[:]),
		Headers: len(m.Headers),
	}
	for _, h := range m.Headers {
		doc.HeaderBytes += len(h.Key) + len(h.Value)
	}
	out := kafka.Message{Headers: append(ownHeaders(m, reason, errText),
		kafka.Header{Key: HeaderTruncated, Value: []byte(strconv.Itoa(len(m.Value)))})}
	// What the stub's value takes before any original content: its fields
	// at their longest (every part cut, every count at its width).
	skeleton := doc
	skeleton.Cut = []string{"key", "headers", "value"}
	skeleton.HeadersKept = len(m.Headers)
	skeleton.ValueHeadBytes = len(m.Value)
	room := limit - recordBytes(kafka.Message{Key: []byte(message.BoundID(string(m.Key))), Value: marshalStub(skeleton),
		Headers: out.Headers})
	out.Key = []byte(message.BoundID(string(m.Key)))
	if !minimal && room > 0 && len(m.Key)-len(out.Key) <= room {
		room -= len(m.Key) - len(out.Key)
		out.Key = m.Key
	}
	if !minimal {
		for _, h := range foreignHeaders(m.Headers) {
			if n := headerOverhead + len(h.Key) + len(h.Value); n <= room {
				out.Headers = append(out.Headers, h)
				room -= n
				doc.HeadersKept++
			}
		}
		doc.ValueHead, doc.ValueHeadBytes = valueHead(m.Value, room)
	}
	if !bytes.Equal(out.Key, m.Key) {
		doc.Cut = append(doc.Cut, "key")
	}
	if doc.HeadersKept < len(m.Headers) {
		doc.Cut = append(doc.Cut, "headers")
	}
	if doc.ValueHeadBytes < len(m.Value) {
		doc.Cut = append(doc.Cut, "value")
	}
	if len(doc.Cut) == 0 {
		// Everything is there, only the value is a stub's: say so, as
		// the value is not the original's bytes.
		doc.Cut = []string{"value"}
	}
	out.Value = marshalStub(doc)
	return out
}

// valueHead is the longest prefix of v (not splitting a UTF-8 sequence)
// whose JSON string encoding (marshalStub's) takes at most room bytes, as
// a string, and its length in bytes of v. One pass: each rune's encoded
// size is known (an upper bound for control characters).
func valueHead(v []byte, room int) (string, int) {
	enc := 2 // the quotes
	n := 0
	for n < len(v) {
		r, size := utf8.DecodeRune(v[n:])
		w := size
		switch {
		case r == utf8.RuneError && size == 1:
			w = 6 // \ufffd
		case r == '"' || r == '\\':
			w = 2
		case r < 0x20 || r == '\u2028' || r == '\u2029':
			w = 6 // \u00XX; \n, \t and the like take 2
		}
		if enc+w > room {
			break
		}
		enc += w
		n += size
	}
	return string(v[:n]), n
}

func marshalStub(s stub) []byte {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a struct of strings and numbers: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// isTooLarge reports a record refused for its size, by kafka-go before
// sending (BatchBytes) or by the broker (MESSAGE_TOO_LARGE,
// RECORD_LIST_TOO_LARGE). kafka-go returns a broker's answer to a
// synchronous write as WriteErrors, one per message, which errors.Is does
// not look into.
func isTooLarge(err error) bool {
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil && isTooLarge(e) {
				return true
			}
		}
		return false
	}
	return errors.Is(err, kafka.MessageSizeTooLarge) || errors.Is(err, kafka.RecordListTooLarge)
}

// refusedByClient reports whether a too-large error came from kafka-go's
// own check, before anything was sent.
func refusedByClient(err error) bool {
	var tl kafka.MessageTooLargeError
	return errors.As(err, &tl)
}
