// Package loadgen drives a running stage the way a user does: it produces
// requests to the request topic of a Kafka-protocol broker and reads the
// completion events (and dead letters) the stage publishes, to measure
// throughput from a backlog and latency on an idle stage (issues 14 and 15).
// It is `walkstage load`'s logic.
//
// It knows the message formats (docs/reference/messages.md) and Kafka; it knows
// nothing of the stage's internals: what it measures is what a producer and
// a consumer of the topics see, plus the timings the events carry.
package loadgen

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/walkstage/walkstage/graph"
)

// Output kinds of the requests produced.
const (
	OutputWalks  = "walks"
	OutputVisits = "visits"
	// OutputSamples: graph sampling requests (a GNN trainer's mini-batches:
	// Seeds seeds each, Algorithm a sampler with the Sample parameters).
	OutputSamples = "samples"
)

// Config describes one measurement. The zero value is not usable: start
// from Defaults.
type Config struct {
	Brokers      []string
	RequestTopic string
	EventTopic   string
	DLQTopic     string

	Requests int    // requests measured
	Output   string // OutputWalks, OutputVisits or OutputSamples

	// The walk of every request.
	Algorithm string  // deepwalk, ppr, node2vec, metapath
	Weighted  bool    // bias by edge weight
	Length    int     // steps per walk (visits: the cap of each walk)
	Restart   float64 // ppr's stop_probability (visits: the restart probability)

	// Walk requests: Seeds seeds, each walked Walks times; WalkParams
	// are more members of each request's JSON object (e.g. "p":0.5,"q":2
	// for node2vec, "schema":[0,1] for metapath).
	Seeds      int
	Walks      int
	WalkParams string

	// Samples requests: Seeds seeds each; Sample holds the sampler's
	// parameters as members of a JSON object (default for neighbor:
	// "fanouts":[25,10]).
	Sample string

	// Visits requests: Queries queries of one seed each.
	Queries       int
	StepsPerQuery int
	TopK          int

	// Phase splits a backlog in two runs, for a true backlog (PhaseAll,
	// PhaseProduce, PhaseCollect); the two runs need the same IDPrefix,
	// RNGSeed and request shape.
	Phase string
	// OnWatching, when set, is called once the run reads the event topics
	// from their ends, before it produces anything: a script starts the
	// stage of a collect after it.
	OnWatching func()

	// RNGSeed draws the seeds: request i's seeds depend only on RNGSeed, i
	// and the seed pool, so two runs send the same requests.
	RNGSeed uint64
	// IDPrefix starts every batch id ("<prefix>-<i>"); it must be new to
	// the stage, or the stage answers from the outputs it already wrote.
	IDPrefix string

	// Idle series: Warmup requests sent first and not measured, and a
	// pause of Gap after each event before the next request.
	Warmup int
	Gap    time.Duration

	// Expensive is the request produced first in the beside mode, walked
	// beside the measured series: the members of its JSON object other
	// than version and batch_id (its batch id is "<prefix>-expensive").
	Expensive string

	// Timeout bounds the whole measurement.
	Timeout time.Duration
}

// Defaults is issue 14's walk request shape against the stage's default
// topics: 1,000 requests of 1,000 seeds x 10 weighted DeepWalk walks of 80
// steps; with Output = OutputVisits, issue 15's shape applies instead (see
// Normalize).
func Defaults() Config {
	return Config{RequestTopic: "walkstage-requests", EventTopic: "walkstage-completions", DLQTopic: "walkstage-dlq",
		Requests: 1000, Output: OutputWalks, Weighted: true, Length: 80, Restart: 0.2,
		Seeds: 1000, Walks: 10, Queries: 100, StepsPerQuery: 100000, TopK: 100,
		RNGSeed: 1, Warmup: 1, Timeout: 10 * time.Minute}
}

// Normalize fills what depends on the output (the algorithm: weighted
// DeepWalk for walks, PPR for visits) and an id prefix, then validates.
func (c *Config) Normalize() error {
	if c.Algorithm == "" {
		c.Algorithm = "deepwalk"
		switch c.Output {
		case OutputVisits:
			c.Algorithm = "ppr"
		case OutputSamples:
			c.Algorithm = "neighbor"
		}
	}
	if c.Output == OutputSamples && c.Sample == "" && c.Algorithm == "neighbor" {
		c.Sample = `"fanouts":[25,10]`
	}
	if c.Phase != PhaseAll && c.Phase != PhaseProduce && c.Phase != PhaseCollect {
		return fmt.Errorf("phase %q: want produce or collect (or none)", c.Phase)
	}
	if c.Phase != PhaseAll && c.IDPrefix == "" {
		return fmt.Errorf("phase %s needs an id prefix: the produce and the collect must name the same batch ids", c.Phase)
	}
	if c.IDPrefix == "" {
		c.IDPrefix = "load-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	}
	return c.validate()
}

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if len(c.Brokers) == 0 {
		bad("no brokers")
	}
	for _, t := range []struct{ name, v string }{{"request topic", c.RequestTopic}, {"event topic", c.EventTopic}, {"dead-letter topic", c.DLQTopic}} {
		if t.v == "" {
			bad("empty %s", t.name)
		}
	}
	if c.Requests < 1 {
		bad("requests %d: want at least 1", c.Requests)
	}
	switch c.Output {
	case OutputWalks:
		if c.Seeds < 1 || c.Walks < 1 {
			bad("seeds %d x walks %d: want at least 1 each", c.Seeds, c.Walks)
		}
	case OutputVisits:
		if c.Queries < 1 || c.StepsPerQuery < 1 || c.TopK < 1 {
			bad("queries %d, steps per query %d, top k %d: want at least 1 each", c.Queries, c.StepsPerQuery, c.TopK)
		}
	case OutputSamples:
		if c.Seeds < 1 {
			bad("seeds %d: want at least 1", c.Seeds)
		}
		if c.Sample != "" && !json.Valid([]byte("{"+c.Sample+"}")) {
			bad("sample parameters %q: want the members of a JSON object, e.g. \"fanouts\":[25,10]", c.Sample)
		}
	default:
		bad("output %q: want walks, visits or samples", c.Output)
	}
	if c.Length < 1 {
		bad("length %d: want at least 1", c.Length)
	}
	if c.Algorithm == "ppr" && (c.Restart <= 0 || c.Restart >= 1) {
		bad("restart %v: want a probability in (0, 1)", c.Restart)
	}
	if c.Expensive != "" && !json.Valid([]byte("{"+c.Expensive+"}")) {
		bad("expensive request %q: want the members of a JSON object, e.g. \"algorithm\":\"node2vec\",\"p\":1e-6,...", c.Expensive)
	}
	if c.Warmup < 0 || c.Gap < 0 {
		bad("warmup %d, gap %v: want 0 or more", c.Warmup, c.Gap)
	}
	if c.Timeout <= 0 {
		bad("timeout %v: want a positive duration", c.Timeout)
	}
	if strings.ContainsFunc(c.IDPrefix, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) {
		bad("id prefix %q: batch ids take A-Z a-z 0-9 . _ - only", c.IDPrefix)
	}
	return errors.Join(errs...)
}

// SeedPool lists the external ids of g's vertices that have out-edges:
// requests draw their seeds from it, so every walk takes its steps and
// every query spends its budget.
func SeedPool(g *graph.Graph) []int64 {
	var ids []int64
	for v := range uint32(g.NumVertices()) {
		if g.Degree(v) > 0 {
			ids = append(ids, g.ExternalID(v))
		}
	}
	return ids
}

// RangePool is the seed pool of a graph with dense ids 0..n-1, all taken to
// have out-edges (use SeedPool when the graph file is at hand).
func RangePool(n int) []int64 {
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(i)
	}
	return ids
}

// ExpensiveRequest is the beside mode's expensive request: its key and
// JSON body.
func (c *Config) ExpensiveRequest() (key string, body []byte) {
	id := c.IDPrefix + "-expensive"
	return id, fmt.Appendf(nil, `{"version":1,"batch_id":%q,%s}`, id, c.Expensive)
}

// BatchID is request i's batch id.
func (c *Config) BatchID(i int) string { return c.IDPrefix + "-" + strconv.Itoa(i) }

// Request returns request i's key and JSON body: its seeds (walks) or
// one-seed queries (visits) drawn uniformly, with replacement, from pool by
// a generator keyed by (RNGSeed, i).
func (c *Config) Request(i int, pool []int64) (key string, body []byte) {
	id := c.BatchID(i)
	n := c.Seeds
	if c.Output == OutputVisits {
		n = c.Queries
	}
	rng := rand.New(rand.NewPCG(c.RNGSeed, uint64(i)))
	b := make([]byte, 0, 256+n*9)
	b = append(b, `{"version":1,"batch_id":`...)
	b = strconv.AppendQuote(b, id)
	b = append(b, `,"algorithm":`...)
	b = strconv.AppendQuote(b, c.Algorithm)
	if c.Weighted {
		b = append(b, `,"weighted":true`...)
	}
	if c.Output == OutputSamples {
		b = append(b, `,"output":"samples"`...)
		if c.Sample != "" {
			b = append(b, ',')
			b = append(b, c.Sample...)
		}
		return id, appendSeeds(b, n, rng, pool)
	}
	if c.Algorithm == "ppr" {
		b = append(b, `,"stop_probability":`...)
		b = strconv.AppendFloat(b, c.Restart, 'g', -1, 64)
	}
	b = append(b, `,"length":`...)
	b = strconv.AppendInt(b, int64(c.Length), 10)
	if c.Output == OutputVisits {
		b = append(b, `,"output":"visits","top_k":`...)
		b = strconv.AppendInt(b, int64(c.TopK), 10)
		b = append(b, `,"steps_per_query":`...)
		b = strconv.AppendInt(b, int64(c.StepsPerQuery), 10)
	} else {
		b = append(b, `,"walks_per_seed":`...)
		b = strconv.AppendInt(b, int64(c.Walks), 10)
		if c.WalkParams != "" {
			b = append(b, ',')
			b = append(b, c.WalkParams...)
		}
	}
	return id, appendSeeds(b, n, rng, pool)
}

// appendSeeds ends a request's body with n seeds drawn from pool.
func appendSeeds(b []byte, n int, rng *rand.Rand, pool []int64) []byte {
	b = append(b, `,"seeds":[`...)
	for j := range n {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, pool[rng.IntN(len(pool))], 10)
	}
	return append(b, "]}"...)
}
