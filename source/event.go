package source

import "time"

// EventVersion is the completion event format version.
const EventVersion = 1

// Status of a finished batch.
type Status string

const (
	StatusSucceeded Status = "succeeded" // objects and _SUCCESS written
	StatusFailed    Status = "failed"    // valid request, but walking or writing failed after every attempt
	StatusRejected  Status = "rejected"  // the request itself was refused (see Reason)
)

// Event is the completion event published on the output topic, key = batch
// id, once per processed message (at least once: a batch redelivered after a
// crash is reported again with the same objects). docs/messages.md shows
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

	Seeds        int     `json:"seeds,omitempty"`         // seeds walked
	SkippedSeeds int     `json:"skipped_seeds,omitempty"` // unknown seeds skipped (UNKNOWN_VERTICES=skip)
	SkippedIDs   []int64 `json:"skipped_ids,omitempty"`   // the first 100 of them
	Walks        int64   `json:"walks"`
	Steps        int64   `json:"steps"`
	// Output "visits": the queries answered (rows) and the candidates
	// returned in all; Walks and Steps are the walks and steps counted.
	Queries    int64 `json:"queries,omitempty"`
	Candidates int64 `json:"candidates,omitempty"`

	// Objects are the Parquet objects' URLs in walk-id order; Manifest is the
	// URL of the _SUCCESS object written after them, which lists them too.
	Objects  []string `json:"objects,omitempty"`
	Manifest string   `json:"manifest,omitempty"`

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
