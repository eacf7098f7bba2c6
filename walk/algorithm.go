// Package walk holds what a walk is, the contract every engine keeps: the
// algorithm descriptions and their validation (algorithm.go, timeparams.go
// for temporal walks, whose header is the temporal draw's specification),
// the draw contract of the steppers, the per-step transition choice
// (draws.go: which Philox word serves which decision), the Philox4x32-10
// random stream (philox.go), the deterministic exp both engines compute to
// the same bits (detexp.go), alias and label-segment tables as both engines
// lay them out, the engine interface with its optional capabilities
// (engine.go), and the cost model that sizes work. The engines live
// elsewhere: the multi-core CPU engine, the reference for every other, in
// walk/cpu; the CUDA engine in gpu. C-SAW graph sampling, which draws
// subgraphs rather than walks, is in graphsample; visit counting (top-k
// vertices of walks with restart) in walk/visits, on top of any Engine. It
// imports graph only; it knows nothing of Kafka, Parquet or CUDA.
//
// Size: a little over the project's ~3,000 lines without tests, because
// the live graph's delta index (overlay.go, appended.go: about 1,200 of
// them) is part of the contract: Job.Overlay, the Overlay interface both
// engines walk and the index they read are one API, and the draw contract
// of a step on a delta is this package's like every other step's. Its own
// package is the way down when it grows again; it would take the Overlay
// interface with it.
package walk

import (
	"fmt"
	"math"
	"strings"

	"github.com/walkstage/walkstage/graph"
)

// Kind names a walk algorithm.
type Kind uint8

const (
	DeepWalk Kind = iota + 1 // first order, uniform or edge-weighted
	PPR                      // DeepWalk that stops with probability StopProb before each step
	Node2Vec                 // second order with return (p) and in-out (q) factors
	MetaPath                 // step i follows only edges labelled Schema[i mod len(Schema)]
	Temporal                 // time-respecting first order walk on a timed graph (temporal.go)
)

var kindNames = map[Kind]string{DeepWalk: "deepwalk", PPR: "ppr", Node2Vec: "node2vec", MetaPath: "metapath", Temporal: "temporal"}

func (k Kind) String() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind accepts the names String returns (case-insensitive).
func ParseKind(s string) (Kind, error) {
	for k, n := range kindNames {
		if strings.EqualFold(s, n) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown algorithm %q (want deepwalk, ppr, node2vec, metapath or temporal)", ErrInvalidAlgorithm, s)
}

// StepperKind names a per-step transition method (a stepper): how a walk
// picks the edge of its next step. Its String names are the wire values of
// a request's "sampler" field and of manifests and events, which keep that
// word; in Go, "sampling" is graphsample's C-SAW graph sampling.
type StepperKind uint8

const (
	StepperAuto      StepperKind = iota // chosen from the algorithm's bias (see Algorithm.ResolvedStepper)
	StepperUniform                      // O(1): one draw, index = mulhi(draw, degree)
	StepperAlias                        // O(1) alias table built once per graph from the static weights
	StepperRejection                    // Node2Vec: proposal from the static bias, accept by p/q factor
	StepperZPRS                         // zig-zag parallel reservoir sampling, O(1) memory, any dynamic bias
	StepperDPRS                         // direct parallel reservoir sampling, O(1) memory, any dynamic bias
	StepperWindow                       // Temporal: binary search of the time window, then its draw (temporal.go)
)

var samplerNames = map[StepperKind]string{StepperAuto: "auto", StepperUniform: "uniform", StepperAlias: "alias",
	StepperRejection: "rejection", StepperZPRS: "zprs", StepperDPRS: "dprs", StepperWindow: "window"}

func (s StepperKind) String() string {
	if n, ok := samplerNames[s]; ok {
		return n
	}
	return fmt.Sprintf("sampler(%d)", uint8(s))
}

// ParseStepper accepts the names String returns (case-insensitive).
func ParseStepper(s string) (StepperKind, error) {
	for k, n := range samplerNames {
		if strings.EqualFold(s, n) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: unknown sampler %q (want auto, uniform, alias, rejection, zprs, dprs or window)", ErrInvalidAlgorithm, s)
}

// Limits on walk parameters, independent of any deployment's tighter limits.
const (
	MaxLength     = 1 << 16 // steps per walk
	MaxSchemaLen  = 64
	maxPQ         = 1e6
	minPQ         = 1e-6
	DefaultLength = 80
)

// Algorithm is the one description of a walk that every engine executes.
// The zero value is not valid; use Validate before running.
type Algorithm struct {
	Kind     Kind
	Length   int     // maximum number of steps (the walk holds up to Length+1 vertices)
	Weighted bool    // bias by edge weight (requires a weighted graph)
	StopProb float64 // PPR: probability of stopping before each step, in (0, 1)
	P, Q     float64 // Node2Vec return and in-out parameters, > 0
	Schema   []uint8 // MetaPath: edge labels applied cyclically, step i uses Schema[i%len]
	// Stepper forces the per-step transition method (the request's
	// "sampler" field); StepperAuto picks the fastest exact one.
	Stepper StepperKind
	// Time holds Temporal's parameters; the zero value for every other kind.
	Time TimeParams
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidAlgorithm, fmt.Sprintf(format, a...))
}

// Validate checks the parameters, and when g is not nil, that the graph can
// serve them (weights present, schema labels exist).
func (a Algorithm) Validate(g *graph.Graph) error {
	if _, ok := kindNames[a.Kind]; !ok {
		return invalid("unknown algorithm kind %d", a.Kind)
	}
	if a.Length < 1 || a.Length > MaxLength {
		return invalid("length %d out of range [1, %d]", a.Length, MaxLength)
	}
	if a.Kind == PPR {
		if !(a.StopProb > 0 && a.StopProb < 1) {
			return invalid("ppr stop probability %v must be in (0, 1)", a.StopProb)
		}
	} else if a.StopProb != 0 {
		return invalid("stop probability is only for ppr, not %s", a.Kind)
	}
	if a.Kind == Node2Vec || a.Kind == Temporal && (a.P != 0 || a.Q != 0) {
		for _, x := range []struct {
			n string
			v float64
		}{{"p", a.P}, {"q", a.Q}} {
			if !(x.v >= minPQ && x.v <= maxPQ) || math.IsNaN(x.v) {
				return invalid("node2vec %s = %v must be in [%g, %g]", x.n, x.v, minPQ, maxPQ)
			}
		}
	} else if a.P != 0 || a.Q != 0 {
		return invalid("p and q are only for node2vec and temporal, not %s", a.Kind)
	}
	if a.Kind == MetaPath {
		if len(a.Schema) == 0 || len(a.Schema) > MaxSchemaLen {
			return invalid("metapath schema needs 1 to %d labels, got %d", MaxSchemaLen, len(a.Schema))
		}
	} else if len(a.Schema) != 0 {
		return invalid("a schema is only for metapath, not %s", a.Kind)
	}
	if a.Kind == Temporal {
		if err := a.Time.validate(); err != nil {
			return err
		}
		if a.Stepper != StepperAuto && a.Stepper != StepperWindow {
			return invalid("temporal walks draw from their time window; sampler %s cannot serve them (leave it auto)", a.Stepper)
		}
	} else if a.Time != (TimeParams{}) {
		return invalid("time_bias, time_scale, start_time, max_time_gap and direction are only for temporal, not %s", a.Kind)
	}
	if _, ok := samplerNames[a.Stepper]; !ok {
		return invalid("unknown sampler %d", a.Stepper)
	}
	if a.Stepper == StepperWindow && a.Kind != Temporal {
		return invalid("the window sampler is for temporal, not %s", a.Kind)
	}
	switch a.Stepper {
	case StepperUniform:
		if a.Weighted || a.Kind == Node2Vec || a.Kind == MetaPath {
			return invalid("the uniform sampler cannot serve %s (weighted=%v)", a.Kind, a.Weighted)
		}
	case StepperAlias:
		if a.Kind == Node2Vec || a.Kind == MetaPath {
			return invalid("the alias sampler cannot serve %s: its bias is dynamic", a.Kind)
		}
	case StepperRejection:
		if a.Kind != Node2Vec {
			return invalid("the rejection sampler is for node2vec, not %s", a.Kind)
		}
	}
	if g == nil {
		return nil
	}
	if a.Weighted && !g.Weighted() {
		return invalid("weighted %s needs edge weights, and graph %q has none", a.Kind, g.Name)
	}
	if a.Kind == Temporal && !g.Timed() {
		return invalid("temporal walks need edge times, and graph %q has none (import it with graph import --time-column)", g.Name)
	}
	if a.Kind == MetaPath {
		if !g.Labelled() {
			return invalid("metapath needs edge labels, and graph %q has none", g.Name)
		}
		for i, l := range a.Schema {
			if int(l) >= g.NumLabels {
				return invalid("metapath schema[%d] = %d, but graph %q has labels 0..%d", i, l, g.Name, g.NumLabels-1)
			}
		}
	}
	return nil
}

// ResolvedStepper resolves StepperAuto: uniform for unweighted first-order walks,
// alias for weighted ones, rejection for Node2Vec, ZPRS for MetaPath (its
// bias changes with the step, so no static table serves it).
func (a Algorithm) ResolvedStepper() StepperKind {
	if a.Stepper != StepperAuto {
		return a.Stepper
	}
	switch a.Kind {
	case Node2Vec:
		return StepperRejection
	case MetaPath:
		return StepperZPRS
	case Temporal:
		return StepperWindow
	}
	if a.Weighted {
		return StepperAlias
	}
	return StepperUniform
}

// String is a stable, human-readable rendering used in logs and metadata.
// Its sampler is the resolved one; Describe names what an engine runs on a
// given graph.
func (a Algorithm) String() string { return a.describe(a.ResolvedStepper().String()) }

// Describe is String with the sampler an engine runs a with on g
// (StepperName): MetaPath says "label-alias" rather than "zprs".
func (a Algorithm) Describe(g *graph.Graph) string { return a.describe(StepperName(a, g)) }

func (a Algorithm) describe(sampler string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s length=%d weighted=%v", a.Kind, a.Length, a.Weighted)
	switch a.Kind {
	case PPR:
		fmt.Fprintf(&b, " stop=%g", a.StopProb)
	case Node2Vec:
		fmt.Fprintf(&b, " p=%g q=%g", a.P, a.Q)
	case MetaPath:
		fmt.Fprintf(&b, " schema=%v", a.Schema)
	case Temporal:
		b.WriteString(" " + a.Time.String())
		if a.P != 0 {
			fmt.Fprintf(&b, " p=%g q=%g", a.P, a.Q)
		}
	}
	fmt.Fprintf(&b, " sampler=%s", sampler)
	return b.String()
}
