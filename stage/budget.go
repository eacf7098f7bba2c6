package stage

// Admission control by cost (issue 32): every walk and visits request's
// engine cost is estimated at intake (walk.CostModel, in O(1) steps, with
// Node2Vec's rejection rounds bounded from p and q). Above the per-request
// budget it is rejected; above the per-micro-batch budget it walks alone,
// in slices, with the queued micro-batches walking between its slices
// (runJobs, internal/turns), so one expensive request cannot hold the engine
// for minutes while small ones wait.

import (
	"fmt"
	"runtime"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/walk"
)

// ReasonOverBudget rejects a request whose estimated engine cost is above
// WALKSTAGE_MAX_REQUEST_COST.
const ReasonOverBudget message.Reason = "over_budget"

// DefaultMaxRequestCost is the default per-request budget: the largest walk
// request the default limits admit with O(1) steps (MAX_WALKS_PER_BATCH
// 10^7 walks x MAX_WALK_LENGTH 1,000), so only requests whose steps cost
// more than that (extreme Node2Vec p or q, reservoir samplers on hubs) are
// newly refused. Node2Vec at p = 10^-6 is then held to about 7.6 x 10^7
// steps (the walk degree's worth on the graph), not 10^10.
const DefaultMaxRequestCost = 10_000_000_000

// AutoMicroBatchMaxCost is the per-micro-batch budget an engine gets when
// none is set: about a quarter of a second of walking. The CPU engine walks
// 5 to 10 M O(1) steps a second a core (weighted DeepWalk, 109 ns a step
// on 2 shared cores, issue 32's machine), so 2.5 M a core; a GPU walks
// hundreds of times faster and needs large launches to be fast at all.
// workers is the CPU engine's (0: one per core). The hybrid engine gets the
// GPU's: the GPU takes the larger share of a batch, and a batch too small
// for it goes to the CPU alone.
func AutoMicroBatchMaxCost(engine string, workers int) int64 {
	if engine == "gpu" || engine == "hybrid" {
		return 2_000_000_000
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	return 2_500_000 * int64(workers)
}

// requestCost estimates req's engine cost on the graph version v; 0 for
// sampling requests (bounded by MAX_SAMPLED_EDGES and walked in waves).
func requestCost(req *message.Request, v *served) int64 {
	switch {
	case req.Sample != nil:
		return 0
	case req.Visits != nil:
		p := req.Visits.Params
		if p.StepsPerQuery > 0 {
			return v.cost.StepsCost(p.Algorithm, int64(len(req.Visits.Queries))*p.StepsPerQuery)
		}
		var seeds int64
		for _, q := range req.Visits.Queries {
			seeds += int64(len(q.Starts))
		}
		return v.cost.WalkCost(p.Algorithm, seeds*int64(p.WalksPerSeed))
	}
	return v.cost.WalkCost(req.Algorithm, int64(req.NumWalks()))
}

// overBudget is the rejection of a request of cost above the per-request
// budget, saying what the estimate is made of and what would bring it down.
func (s *Stage) overBudget(req *message.Request, cost int64, v *served) *message.RejectError {
	a, what := req.Algorithm, fmt.Sprintf("%d walks x length %d", req.NumWalks(), req.Algorithm.Length)
	if vs := req.Visits; vs != nil {
		a = vs.Params.Algorithm
		if vs.Params.StepsPerQuery > 0 {
			what = fmt.Sprintf("%d queries x steps_per_query %d", len(vs.Queries), vs.Params.StepsPerQuery)
		} else {
			what = fmt.Sprintf("%d queries' seeds x walks_per_seed %d x length %d", len(vs.Queries), vs.Params.WalksPerSeed, a.Length)
		}
	}
	hint := "ask for fewer or shorter walks"
	if a.Kind == walk.Node2Vec {
		hint += ", or p and q nearer 1 (the rejection sampler's rounds grow with max(1/p, 1, 1/q) / min(1/p, 1, 1/q))"
	}
	return &message.RejectError{Reason: ReasonOverBudget, BatchID: req.BatchID,
		Msg: fmt.Sprintf("estimated cost %d steps is above the per-request budget %d (WALKSTAGE_MAX_REQUEST_COST): %s x %.4g O(1) steps a step for %s on graph %s; %s",
			cost, s.o.MaxRequestCost, what, v.cost.StepCost(a), a.Describe(v.g), v.g.Name, hint)}
}

// sliceJob cuts job into slices of at most budget estimated cost each (at
// least one walk a slice), with the walk ids they have in the whole job,
// so the walks are the unsliced job's.
func sliceJob(job walk.Job, perWalk float64, budget int64) []walk.Job {
	n := int64(len(job.Starts))
	per := max(1, int64(float64(budget)/max(perWalk, 1)))
	if per >= n {
		return []walk.Job{job}
	}
	out := make([]walk.Job, 0, (n+per-1)/per)
	for lo := int64(0); lo < n; lo += per {
		hi := min(lo+per, n)
		j := job
		j.Starts, j.FirstWalk = job.Starts[lo:hi], job.FirstWalk+uint64(lo)
		out = append(out, j)
	}
	return out
}

// engineRefuses is the rejection of a request the serving engine cannot
// walk (walk.AlgorithmChecker: the GPU engine and temporal Node2Vec, or a
// temporal walk on a graph not wholly in device memory). It is refused at
// intake, so it never shares an engine run (a micro-batch) whose error
// would reject the requests beside it too.
func engineRefuses(req *message.Request, v *served) *message.RejectError {
	a := req.Algorithm
	if req.Visits != nil {
		a = req.Visits.Params.Algorithm
	}
	if err := walk.CheckAlgorithm(v.e, a); err != nil {
		return &message.RejectError{Reason: message.ReasonInvalidParameters, BatchID: req.BatchID,
			Msg: fmt.Sprintf("this replica's %s engine cannot walk it: %v", v.e.Name(), err)}
	}
	return nil
}
