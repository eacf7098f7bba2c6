//go:build cuda

package gpu

import (
	"fmt"

	"github.com/walkstage/walkstage/walk"
)

// planChoice is the engine's input to the cost model (streamchoice.go).
func (e *Engine) planChoice(alg walk.Algorithm) planChoice {
	c := planChoice{weightedEdge: e.g.Weighted()}
	if sm := e.streamed; sm != nil {
		c.stream = sm.plan
		c.streamWalks = streamSupported(alg, sm.plan) == nil
	}
	if e.placed != nil && temporalSupported(alg, false) == nil {
		c.place = e.placed.plan
	}
	return c
}

// estimate is the pilot's estimate of a batch of n walks of alg (run
// goroutine: groupBatches and enqueue, never at once).
func (e *Engine) estimate(alg walk.Algorithm, n int64) walk.StepsEstimate {
	sm := e.streamed
	if sm.pilots == nil {
		sm.pilots = stepsPilots{}
	}
	return sm.pilots.estimate(e.g, alg, n)
}

// chooseBatch is how a streaming engine walks a batch of n walks of alg:
// the cost model's choice (planChoice.choose), or the one a test forces
// (withStreamBatch) where the engine holds it. A MetaPath batch goes to
// the placement plan only when its label tables were built for the group
// (placedTablesWanted). The choice and its reason go to the stats and the
// debug log.
func (e *Engine) chooseBatch(alg walk.Algorithm, n int64) batchPlan {
	sm := e.streamed
	c := e.planChoice(alg)
	if alg.Kind == walk.MetaPath && e.useLabelTables(alg) && !e.segBuilt {
		c.place = nil
	}
	var plan batchPlan
	var why string
	switch {
	case e.cfg.streamBatch == streamPlaced && c.place != nil, !c.streamWalks:
		plan, why = planPlacement, "forced or the only plan that walks it"
	case e.cfg.streamBatch == streamCopy, e.cfg.streamBatch == streamCopyTail:
		plan, why = planCopy, "forced"
	case e.cfg.streamBatch == streamInPlace:
		plan, why = planInPlace, "forced"
	default:
		var costs planCosts
		plan, costs = c.choose(alg, n, e.estimate(alg, n))
		why = costs.String()
	}
	switch plan {
	case planPlacement:
		sm.stats.PlacedBatches++
	}
	sm.stats.LastChoice = fmt.Sprintf("%s (%s)", plan, why)
	e.cfg.logger.Debug("gpu batch plan", "algorithm", alg.String(), "walks", n, "plan", plan.String(), "why", why)
	return plan
}

// placedTablesWanted says whether a group of total walks of alg, MetaPath
// on label tables, should have the placement plan's label tables built:
// the engine holds a placement plan and a batch of the group would walk
// under it (the tables take device memory the slots then cannot, so they
// are built before the slots are sized, not per batch).
func (e *Engine) placedTablesWanted(alg walk.Algorithm, total int64) bool {
	if e.placed == nil {
		return false
	}
	c := e.planChoice(alg)
	switch {
	case !c.streamWalks || e.cfg.streamBatch == streamPlaced:
		return true
	case e.cfg.streamBatch != streamChoose:
		return false
	}
	n := total
	if e.cfg.maxBatchWalks > 0 {
		n = min(n, int64(e.cfg.maxBatchWalks))
	}
	plan, _ := c.choose(alg, n, e.estimate(alg, n))
	return plan == planPlacement
}
