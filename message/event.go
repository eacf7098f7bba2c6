package message

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// EventVersion is the completion event format version. Version 2 writes
// skipped_ids as decimal strings (IDs); version 1 wrote JSON numbers.
const EventVersion = 2

// Status of a finished batch.
type Status string

const (
	StatusSucceeded Status = "succeeded" // objects and _SUCCESS written
	StatusFailed    Status = "failed"    // valid request, but walking or writing failed after every attempt
	StatusRejected  Status = "rejected"  // the request itself was refused (see Reason)
)

// Event is the completion event published on the output topic, key = batch
// id, once per processed message (at least once: a batch redelivered after a
// crash is reported again with the same objects). docs/reference/messages.md shows
// examples.
type Event struct {
	Version int    `json:"version"`
	BatchID string `json:"batch_id"`
	Status  Status `json:"status"`
	// Reason is the rejection class (Reason constants) or "engine" / "sink"
	// for failures; Error is the human-readable cause. Both empty on success.
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`

	Graph        string `json:"graph,omitempty"`
	GraphVersion string `json:"graph_version,omitempty"`
	Algorithm    string `json:"algorithm,omitempty"` // walk.Algorithm.Describe(graph)
	Engine       string `json:"engine,omitempty"`
	RNGSeed      uint64 `json:"rng_seed,omitempty,string"` // a decimal string: exact in every JSON reader

	Seeds        int   `json:"seeds,omitempty"`         // seeds walked
	SkippedSeeds int   `json:"skipped_seeds,omitempty"` // unknown seeds skipped (UNKNOWN_VERTICES=skip)
	SkippedIDs   IDs   `json:"skipped_ids,omitempty"`   // the first 100 of them
	Walks        int64 `json:"walks"`
	Steps        int64 `json:"steps"`
	// Output "visits": the queries answered (rows) and the candidates
	// returned in all; Walks and Steps are the walks and steps counted.
	Queries    int64 `json:"queries,omitempty"`
	Candidates int64 `json:"candidates,omitempty"`

	// Objects are the Parquet objects' URLs in walk-id order; Manifest is the
	// URL of the _SUCCESS object written after them, which lists them too.
	Objects  []string `json:"objects,omitempty"`
	Manifest string   `json:"manifest,omitempty"`

	// EdgeOffsets is the watermark of the live graph snapshot the batch
	// walked on: per edge-topic partition, the offset after the last
	// record it holds. Absent when the stage has no live graph, or the
	// request walked the loaded version without its updates.
	EdgeOffsets map[int32]int64 `json:"edge_offsets,omitempty"`

	Timings     Timings   `json:"timings"`
	CompletedAt time.Time `json:"completed_at"`
}

// Timings split a batch's latency, in seconds.
type Timings struct {
	Queued  float64 `json:"queued_seconds"`  // fetched -> engine launch
	Walking float64 `json:"walking_seconds"` // the engine run the batch took part in
	Writing float64 `json:"writing_seconds"` // last walk emitted -> manifest durable
	Total   float64 `json:"total_seconds"`   // fetched -> event being published
}

// IDs are external vertex ids as text: a graph's string ids, or 64-bit
// integer ids as decimal strings, as rng_seed is written (JavaScript's
// JSON.parse and jq 1.6 hold numbers as doubles, which round ids above
// 2^53: 2^53+1 arrives as 2^53). Encoded as a JSON array of strings;
// decoding also takes integers, as version 1 events wrote them.
type IDs []string

// UnmarshalJSON reads an array of strings or of integers (in the int64
// range, kept as their decimal text).
func (ids *IDs) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*ids = nil
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("ids: %w", err)
	}
	out := make(IDs, len(raw))
	for i, r := range raw {
		if len(r) > 0 && r[0] == '"' {
			if err := json.Unmarshal(r, &out[i]); err != nil {
				return fmt.Errorf("ids[%d]: %w", i, err)
			}
			continue
		}
		v, err := strconv.ParseInt(string(r), 10, 64)
		if err != nil {
			return fmt.Errorf("ids[%d]: %s is neither a string nor a 64-bit integer", i, r)
		}
		out[i] = strconv.FormatInt(v, 10)
	}
	*ids = out
	return nil
}
