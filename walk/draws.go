package walk

import "github.com/walkstage/walkstage/graph"

// This file is the draw contract of the per-step samplers, the steppers:
// which random word serves which decision. The CPU engine (walk/cpu) and
// the GPU kernels (kernels/samplers.cuh) follow it word for word
// for the uniform, alias, rejection (Node2Vec) and label-table (MetaPath)
// samplers, so those walks match walk by walk (gpu's TestWalksMatchCPU), and
// in distribution for the reservoir samplers.
//
// Philox draw 0 of (seed, walk, step) gives words x0..x3:
//   uniform            next = adj[index(x0, d)]
//   alias              col = index(x0, d); keep col if Unit24(x1) < Prob[col], else Alias[col]
//   ppr                stop before the step if x0 < Threshold(stop); then uniform on x1 or alias on x1, x2
//   node2vec, step 0   as uniform or alias
//   node2vec, step>0   attempt a uses draw a: proposal on x0 (and x1 when weighted), accept if
//                      x2 < Threshold(f/fmax), f = 1/p (back to prev), 1 (neighbour of prev), 1/q (else);
//                      after MaxRejections attempts an exact scan (draws FallbackDraw...) decides
//   zprs, dprs         element i of the adjacency draws word i%4 of draw ReservoirDraw+i/4
//   temporal node2vec, attempt a uses draws 2a and 2a+1: on draw 2a the temporal step's proposal as
//   step>0             its draw 0 (time bias times weight; weighted linear: by weight on x0, x1),
//                      on draw 2a+1 weighted linear first needs x0 n < (n - rank) 2^32, then x1
//                      (x0 otherwise) < Threshold(f/fmax) as Node2Vec; an exponential window whose
//                      sums are zero, or MaxRejections attempts, fall back to zprs (32 lanes) over
//                      the window in time order on draws TemporalN2VFallbackDraw + i/4
//   on a live graph's  (walk/overlay.go; DeepWalk and PPR) a vertex without a delta steps as above; one
//   delta              with a delta: attempt a uses draw a (PPR: draw a+1, its stop on draw 0's x0):
//                      base side if x2 < (base weight / (base weight + len(delta) x max weight))
//                      of 2^32 (in float64; unweighted: edge counts); then the base edge as uniform
//                      or alias on x0, x1, taken unless deleted; else appended edge index(x3, n),
//                      kept if Unit24(x1) x max weight < its weight (weighted) and not deleted;
//                      after MaxRejections attempts an exact scan (draw FallbackDraw (+1 for PPR))
//   metapath on a      (walk/cpu/overlaymetapath.go; auto sampler) a vertex without a delta steps as on
//   delta              the base; one with a delta: attempt a uses draw a, label L = Schema[step % len]:
//                      base side if x2 < (wb / (wb + len(delta) x max weight)) of 2^32, wb the base
//                      segment of L's length or weight sum, dead edges included (unweighted: len(delta));
//                      then a base edge inside the segment as uniform or alias on x0, x1, taken unless
//                      deleted; else appended edge index(x3, n), kept if labelled L, if Unit24(x1) x
//                      max weight < its weight (weighted) and not deleted; after MaxRejections attempts
//                      (or at once without label tables) an exact scan of the live edges labelled L
//                      (draw FallbackDraw); none ends the walk
//   metapath           label tables (UsesLabelTables): as uniform or alias inside the segment of
//                      label Schema[step % len(Schema)]; otherwise zprs over the edges with that
//                      label (weighted or not)

const (
	// MaxRejections bounds Node2Vec's rejection loop; extreme p/q (acceptance
	// rates near zero) fall back to an exact scan so walks stay exact and
	// a step's cost stays bounded.
	MaxRejections = 64
	FallbackDraw  = MaxRejections
	// TemporalN2VFallbackDraw is the first draw of temporal Node2Vec's
	// exact fallback, past the draws of its MaxRejections attempts.
	TemporalN2VFallbackDraw = 2 * MaxRejections
	// ReservoirDraw is the first draw of a reservoir sampler's per-element
	// words (draw 0 holds the PPR stop word).
	ReservoirDraw = 1
	// Lanes is k, the number of parallel lanes of the reference ZPRS and
	// DPRS: a warp.
	Lanes = 32
)

// MaxTableLabels bounds the label count for which MetaPath samples from
// label tables: the build makes one pass over each adjacency per label.
// Both engines use the same rule.
const MaxTableLabels = 16

// UsesLabelTables says whether an engine samples algorithm a on graph g
// through label tables. MetaPath's bias (label indicator times static
// weight) is static per (vertex, label), so unless a reservoir sampler is
// forced each step is an O(1) draw inside the segment of the wanted label,
// like a first-order walk, instead of a scan of the whole adjacency.
func UsesLabelTables(a Algorithm, g *graph.Graph) bool {
	return a.Kind == MetaPath && a.Stepper == StepperAuto && g.NumLabels <= MaxTableLabels
}

// StepperName names the stepper an engine runs a with on g: the resolved
// stepper, or for MetaPath on label tables "label-alias" (weighted) or
// "label-uniform". Logs, bench tables and output metadata use it, so they
// say what actually ran.
func StepperName(a Algorithm, g *graph.Graph) string {
	if UsesLabelTables(a, g) {
		if a.Weighted {
			return "label-alias"
		}
		return "label-uniform"
	}
	return a.ResolvedStepper().String()
}
