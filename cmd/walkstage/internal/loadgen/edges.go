package loadgen

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walkstage/walkstage/livegraph"
)

// ModeEdges measures a live graph's ingest (issue 37): edge updates
// produced to the stage's edge topic, and probe walk requests whose
// edge_offsets name them, so the probe's event arrives only once the
// stage's published snapshot holds them. What it measures is what a
// producer of updates and a reader of events see; nothing comes from the
// stage's internals.
//
// Backlog (Rate 0): every update is produced first (PhaseProduce, while
// the stage is stopped, for a true backlog), then a collect starts the
// clock when it watches the event topics (the script starts the stage
// right after) and sends two probes at once: one without edge_offsets
// (its event says when the stage serves at all) and one asking for the
// edge topic's end offsets (its event says when every update is
// walkable). The ingest rate is over the time from the clock's start to
// the second probe's event, start-up included (a lower bound), and, for
// comparison, from the first probe's event to the second (the graph
// loaded and the stage serving; an upper bound when the edge reader
// starts before the stage serves).
//
// Paced (Rate > 0, against a running stage): first a probe asking for the
// edge topic's end offsets, and its event awaited (Settled): what the topic
// held before, a backlog the stage is still applying, is walkable before
// the series starts, so that update -> walkable measures the stream and not
// the catch up; then updates produced at Rate a
// second, one record at a time (acks=all), and after every ProbeEvery
// records two probes: one with edge_offsets just past that record and one
// without. Update -> walkable is the edge record's produce call to its
// probe's event; the probes without edge_offsets give the same path's
// latency when nothing is waited for, so the difference is the ingest's.
const ModeEdges = "edges"

// EdgeConfig is an edge-ingest measurement. Config gives the brokers, the
// request and event topics, the phase, the id prefix, the draw seed and
// the timeout; Requests and the walk shape there are not used (a probe is
// one seed, one walk of one step).
type EdgeConfig struct {
	Config
	EdgeTopic string
	// Updates is how many updates are produced, Batch the updates a record
	// (the binary batch form), DeleteShare the share that delete an edge
	// this run inserted earlier (the rest insert edges between random
	// vertices of the pool).
	Updates     int
	Batch       int
	DeleteShare float64
	// Times gives every insert a time (Unix milliseconds, increasing): a
	// graph with edge times refuses inserts without one.
	Times bool
	// Rate paces the updates (a second); 0 is the backlog.
	Rate float64
	// ProbeEvery is, when paced, the records between two probes.
	ProbeEvery int
}

// EdgeResult is what an edge-ingest measurement saw.
type EdgeResult struct {
	Phase            string
	Updates, Records int
	// Produced is the produce calls' time (the backlog's, or the whole
	// paced series).
	Produced time.Duration
	// Backlog: Serving is the clock's start to the first probe's event,
	// Walkable to the second's.
	Serving, Walkable time.Duration
	// Paced: per probe, the edge record's produce call to the event of the
	// probe that waits for it (ToWalkable), and the plain probes' produce
	// to event (Plain).
	ToWalkable, Plain []time.Duration
	Rate              float64 // paced: the rate asked for
	// Paced: Settled is how long the stage took to hold what the edge
	// topic held before the series (Held records), which the series then
	// waited for.
	Settled time.Duration
	Held    int64
	// Watermark is the last waiting probe's event's edge_offsets.
	Watermark map[int32]int64
}

func (c *EdgeConfig) validate() error {
	switch {
	case c.EdgeTopic == "":
		return fmt.Errorf("edges: no edge topic (--edge-topic, or WALKSTAGE_EDGE_TOPIC)")
	case c.Updates < 1 || c.Batch < 1 || c.Batch > livegraph.MaxBatch:
		return fmt.Errorf("edges: %d updates in records of %d: want at least 1, records of at most %d", c.Updates, c.Batch, livegraph.MaxBatch)
	case c.DeleteShare < 0 || c.DeleteShare >= 1:
		return fmt.Errorf("edges: delete share %v: want [0, 1)", c.DeleteShare)
	case c.Rate < 0 || c.Rate > 0 && c.ProbeEvery < 1:
		return fmt.Errorf("edges: rate %v with a probe every %d records: want a rate >= 0 and, when paced, a probe every 1 or more", c.Rate, c.ProbeEvery)
	case c.Rate > 0 && c.Phase != PhaseAll:
		return fmt.Errorf("edges: a paced run (--edge-rate) measures a running stage: no --phase")
	}
	return nil
}

// records is the run's updates as binary batch records, drawn from pool by
// a generator keyed by RNGSeed, so a produce and a collect agree on them.
func (c *EdgeConfig) records(pool []int64) [][]byte {
	rng := rand.New(rand.NewPCG(c.RNGSeed, 0xed9e))
	recent := make([][2]int64, 0, 1<<16) // inserts a delete may name
	var out [][]byte
	ups := make([]livegraph.Update, 0, c.Batch)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	for i := range c.Updates {
		u := livegraph.Update{Op: livegraph.Insert}
		if len(recent) > 0 && rng.Float64() < c.DeleteShare {
			p := recent[rng.IntN(len(recent))]
			u = livegraph.Update{Op: livegraph.Delete, Src: p[0], Dst: p[1]}
		} else {
			u.Src, u.Dst = pool[rng.IntN(len(pool))], pool[rng.IntN(len(pool))]
			if c.Times {
				u.Time, u.Has = t0+int64(i), livegraph.HasTime
			}
			if len(recent) < cap(recent) {
				recent = append(recent, [2]int64{u.Src, u.Dst})
			} else {
				recent[rng.IntN(len(recent))] = [2]int64{u.Src, u.Dst}
			}
		}
		// A batch's deletes write 0 in the time column, as the form asks.
		ups = append(ups, u)
		if len(ups) == c.Batch || i == c.Updates-1 {
			out = append(out, livegraph.AppendBinary(nil, ups))
			ups = ups[:0]
		}
	}
	return out
}

// probe is a one-walk request; with offsets it waits for them.
func (c *EdgeConfig) probe(id string, seed int64, offsets map[int32]int64) []byte {
	b := fmt.Appendf(nil, `{"version":1,"batch_id":%q,"algorithm":"deepwalk","length":1,"walks_per_seed":1,"seeds":[%d]`, id, seed)
	if len(offsets) > 0 {
		b = append(b, `,"edge_offsets":{`...)
		first := true
		for _, p := range slices.Sorted(maps.Keys(offsets)) {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = strconv.AppendQuote(b, strconv.Itoa(int(p)))
			b = append(b, ':')
			b = strconv.AppendInt(b, offsets[p], 10)
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

// RunEdges runs an edge-ingest measurement (ModeEdges) with seeds (of the
// probes and the inserted edges' endpoints) from pool.
func RunEdges(ctx context.Context, c EdgeConfig, pool []int64) (*EdgeResult, error) {
	c.Requests = 1 // Config's validation wants one; the probes are counted here
	if err := c.Normalize(); err != nil {
		return nil, fmt.Errorf("load edges: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("load %w", err)
	}
	if len(pool) == 0 {
		return nil, fmt.Errorf("load edges: empty seed pool")
	}
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	p, err := newProducer(c.Brokers)
	if err != nil {
		return nil, fmt.Errorf("load edges: %w", err)
	}
	defer p.Close()
	recs := c.records(pool)
	r := &EdgeResult{Phase: c.Phase, Updates: c.Updates, Records: len(recs), Rate: c.Rate}
	if c.Phase == PhaseProduce {
		t0 := time.Now()
		if _, err := produceEdges(ctx, p, c.EdgeTopic, recs); err != nil {
			return r, fmt.Errorf("load edges: %w", err)
		}
		r.Produced = time.Since(t0)
		return r, nil
	}
	w, err := watch(ctx, c.Brokers, c.EventTopic, c.DLQTopic)
	if err != nil {
		return nil, fmt.Errorf("load edges: %w", err)
	}
	defer w.Close()
	if c.OnWatching != nil {
		c.OnWatching()
	}
	if c.Rate > 0 {
		err = edgesPaced(ctx, &c, pool, recs, p, w, r)
	} else {
		err = edgesBacklog(ctx, &c, pool, recs, p, w, r)
	}
	if err != nil {
		return r, fmt.Errorf("load edges: %w", err)
	}
	return r, nil
}

// produceEdges sends recs to topic, acks=all, and returns the offset after
// the last record of each partition it wrote to.
func produceEdges(ctx context.Context, cl *kgo.Client, topic string, recs [][]byte) (map[int32]int64, error) {
	out := make([]*kgo.Record, len(recs))
	for i, v := range recs {
		out[i] = &kgo.Record{Topic: topic, Key: strconv.AppendInt(nil, int64(i), 10), Value: v}
	}
	res := cl.ProduceSync(ctx, out...)
	if err := res.FirstErr(); err != nil {
		return nil, fmt.Errorf("produce %d edge records to %s: %w", len(recs), topic, err)
	}
	ends := map[int32]int64{}
	for _, pr := range res {
		ends[pr.Record.Partition] = max(ends[pr.Record.Partition], pr.Record.Offset+1)
	}
	return ends, nil
}

func edgesBacklog(ctx context.Context, c *EdgeConfig, pool []int64, recs [][]byte, p *kgo.Client, w *watcher, r *EdgeResult) error {
	t0 := time.Now()
	if c.Phase == PhaseAll {
		if _, err := produceEdges(ctx, p, c.EdgeTopic, recs); err != nil {
			return err
		}
		r.Produced = time.Since(t0)
	}
	meta, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		return fmt.Errorf("client for %v: %w", c.Brokers, err)
	}
	ends, err := endOffsets(ctx, meta, c.EdgeTopic)
	meta.Close()
	if err != nil {
		return err
	}
	var held int64
	for _, o := range ends {
		held += o
	}
	if held != int64(len(recs)) {
		// The stage replays the whole topic: its records must be this
		// run's for the rate to count them.
		return fmt.Errorf("edge topic %s holds %d records, this run produced %d: measure on a new topic", c.EdgeTopic, held, len(recs))
	}
	serving, walkable := c.BatchID(0)+"-serving", c.BatchID(0)+"-walkable"
	if err := produce(ctx, p, c.RequestTopic, []string{serving, walkable},
		[][]byte{c.probe(serving, pool[0], nil), c.probe(walkable, pool[0], ends)}); err != nil {
		return err
	}
	arrived, err := awaitProbes(ctx, c, w, map[string]bool{serving: true, walkable: true})
	if err != nil {
		return err
	}
	r.Serving, r.Walkable = arrived[serving].at.Sub(t0), arrived[walkable].at.Sub(t0)
	r.Watermark = arrived[walkable].ev.EdgeOffsets
	for p, o := range ends {
		if r.Watermark[p] < o {
			return fmt.Errorf("probe %s: its event's edge_offsets %v do not cover the topic's ends %v", walkable, r.Watermark, ends)
		}
	}
	return nil
}

// awaitProbes reads arrivals until every id in want has its event; any of
// them dead-lettered or failed fails the run.
func awaitProbes(ctx context.Context, c *EdgeConfig, w *watcher, want map[string]bool) (map[string]arrival, error) {
	got := map[string]arrival{}
	for len(got) < len(want) {
		var a arrival
		select {
		case a = <-w.out:
		case err := <-w.errc:
			return nil, err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w waiting for %d probe events", ctx.Err(), len(want)-len(got))
		}
		id := a.ev.BatchID
		if a.dead || id == "" {
			id = a.key
		}
		if !want[id] {
			continue
		}
		if err := failure(a); err != nil {
			return nil, err
		}
		if _, seen := got[id]; !seen {
			got[id] = a
		}
	}
	return got, nil
}

// edgesPaced produces the records at c.Rate updates a second and probes
// after every c.ProbeEvery records, reading the probes' events meanwhile.
func edgesPaced(ctx context.Context, c *EdgeConfig, pool []int64, recs [][]byte, p *kgo.Client, w *watcher, r *EdgeResult) error {
	if err := settle(ctx, c, pool, p, w, r); err != nil {
		return err
	}
	type sent struct {
		id      string
		at      time.Time
		waiting map[int32]int64 // the edge_offsets it asked for
	}
	probes := make(chan sent, 1024)
	errc := make(chan error, 1)
	interval := time.Duration(float64(c.Batch) / c.Rate * float64(time.Second))
	t0 := time.Now()
	go func() {
		defer close(probes)
		n := 0 // probes sent
		for i, rec := range recs {
			// Paced against the start, so a slow call is caught up.
			if d := time.Until(t0.Add(time.Duration(i) * interval)); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					errc <- ctx.Err()
					return
				}
			}
			at := time.Now()
			res := p.ProduceSync(ctx, &kgo.Record{Topic: c.EdgeTopic, Key: strconv.AppendInt(nil, int64(i), 10), Value: rec})
			if err := res.FirstErr(); err != nil {
				errc <- fmt.Errorf("produce edge record %d to %s: %w", i, c.EdgeTopic, err)
				return
			}
			if (i+1)%c.ProbeEvery != 0 && i != len(recs)-1 {
				continue
			}
			rr := res[0].Record
			n++
			wid, pid := c.BatchID(n)+"-walkable", c.BatchID(n)+"-plain"
			seed := pool[n%len(pool)]
			pat := time.Now()
			if err := produce(ctx, p, c.RequestTopic, []string{wid, pid},
				[][]byte{c.probe(wid, seed, map[int32]int64{rr.Partition: rr.Offset + 1}), c.probe(pid, seed, nil)}); err != nil {
				errc <- err
				return
			}
			probes <- sent{id: wid, at: at, waiting: map[int32]int64{rr.Partition: rr.Offset + 1}}
			probes <- sent{id: pid, at: pat}
		}
		r.Produced = time.Since(t0)
	}()
	pending := map[string]sent{}
	done := false
	for !done || len(pending) > 0 {
		select {
		case s, ok := <-probes:
			if !ok {
				done, probes = true, nil
				continue
			}
			pending[s.id] = s
		case a := <-w.out:
			id := a.ev.BatchID
			if a.dead || id == "" {
				id = a.key
			}
			s, ours := pending[id]
			if !ours {
				continue
			}
			if err := failure(a); err != nil {
				return err
			}
			delete(pending, id)
			if s.waiting != nil {
				for p, o := range s.waiting {
					if a.ev.EdgeOffsets[p] < o {
						return fmt.Errorf("probe %s asked for edge offsets %v; its event's are %v", id, s.waiting, a.ev.EdgeOffsets)
					}
				}
				r.ToWalkable = append(r.ToWalkable, a.at.Sub(s.at))
				r.Watermark = a.ev.EdgeOffsets
			} else {
				r.Plain = append(r.Plain, a.at.Sub(s.at))
			}
		case err := <-w.errc:
			return err
		case err := <-errc:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%w with %d probes outstanding", ctx.Err(), len(pending))
		}
	}
	return nil
}

// settle waits until the stage walks a snapshot holding everything the edge
// topic holds now: a paced series started into a stage still applying a
// backlog (stage-load.sh starts it once the walks produced beside 13.4 M
// updates are done, with three quarters of the updates left at scale 22)
// measured that backlog's drain in its first seconds' probes, 1.6-2.6 s,
// as update -> walkable's p99, where the series itself stayed within
// 0.2-0.3 s (docs/benchmarks/live-graph.md).
func settle(ctx context.Context, c *EdgeConfig, pool []int64, p *kgo.Client, w *watcher, r *EdgeResult) error {
	meta, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		return fmt.Errorf("client for %v: %w", c.Brokers, err)
	}
	ends, err := endOffsets(ctx, meta, c.EdgeTopic)
	meta.Close()
	if err != nil {
		return err
	}
	r.Held = 0
	for _, o := range ends {
		r.Held += o
	}
	if r.Held == 0 {
		return nil
	}
	t0 := time.Now()
	id := c.BatchID(0) + "-settle"
	if err := produce(ctx, p, c.RequestTopic, []string{id}, [][]byte{c.probe(id, pool[0], ends)}); err != nil {
		return err
	}
	arrived, err := awaitProbes(ctx, c, w, map[string]bool{id: true})
	if err != nil {
		return fmt.Errorf("waiting for the stage to hold the edge topic's %d records before the paced series: %w", r.Held, err)
	}
	r.Settled = arrived[id].at.Sub(t0)
	for p, o := range ends {
		if arrived[id].ev.EdgeOffsets[p] < o {
			return fmt.Errorf("probe %s: its event's edge_offsets %v do not cover the topic's ends %v", id, arrived[id].ev.EdgeOffsets, ends)
		}
	}
	return nil
}

// Report writes r for a reader, then one line "RESULT k=v ..." for scripts.
func (r *EdgeResult) Report(w io.Writer) {
	switch {
	case r.Phase == PhaseProduce:
		fmt.Fprintf(w, "produced %d edge updates in %d records in %.3f s; measure their ingest with --phase collect\n",
			r.Updates, r.Records, r.Produced.Seconds())
	case r.Rate == 0:
		fmt.Fprintf(w, "edges backlog: %d updates in %d records walkable %.3f s after the start (%.2f M updates/s, start-up included);"+
			" the stage served %.3f s after the start", r.Updates, r.Records, r.Walkable.Seconds(),
			perSecond(float64(r.Updates), r.Walkable.Seconds())/1e6, r.Serving.Seconds())
		if r.Walkable > r.Serving { // the probes' events come in either order
			fmt.Fprintf(w, " (%.2f M updates/s from then)", perSecond(float64(r.Updates), (r.Walkable-r.Serving).Seconds())/1e6)
		}
		fmt.Fprintln(w)
	default:
		if r.Held > 0 {
			fmt.Fprintf(w, "edges paced: the stage held the edge topic's %d earlier records %.3f s after the paced run asked (the series started then)\n",
				r.Held, r.Settled.Seconds())
		}
		fmt.Fprintf(w, "edges paced at %.0f updates/s: %d updates in %d records produced in %.3f s (%.0f updates/s); %d probes\n",
			r.Rate, r.Updates, r.Records, r.Produced.Seconds(), perSecond(float64(r.Updates), r.Produced.Seconds()), len(r.ToWalkable))
		for _, l := range []struct {
			name string
			ds   []time.Duration
		}{{"update -> walkable", r.ToWalkable}, {"plain probe", r.Plain}} {
			fmt.Fprintf(w, "  %-18s p50 %8.2f ms  p99 %8.2f ms  max %8.2f ms\n", l.name,
				ms(Quantile(l.ds, 0.5)), ms(Quantile(l.ds, 0.99)), ms(Quantile(l.ds, 1)))
		}
	}
	fmt.Fprintf(w, "RESULT mode=edges phase=%s updates=%d records=%d produce_s=%.3f serving_s=%.3f walkable_s=%.3f rate=%.0f"+
		" walkable_p50_ms=%.2f walkable_p99_ms=%.2f plain_p50_ms=%.2f plain_p99_ms=%.2f settle_s=%.3f\n",
		r.Phase, r.Updates, r.Records, r.Produced.Seconds(), r.Serving.Seconds(), r.Walkable.Seconds(), r.Rate,
		ms(Quantile(r.ToWalkable, 0.5)), ms(Quantile(r.ToWalkable, 0.99)), ms(Quantile(r.Plain, 0.5)), ms(Quantile(r.Plain, 0.99)), r.Settled.Seconds())
}

// EdgeSummary is an edge-ingest measurement as load --json prints it
// (durations in seconds under _seconds keys, docs/reference/vocabulary.md).
type EdgeSummary struct {
	Mode            string  `json:"mode"`
	Phase           string  `json:"phase,omitempty"`
	Updates         int     `json:"updates"`
	Records         int     `json:"records"`
	ProduceSeconds  float64 `json:"produce_seconds"`
	ServingSeconds  float64 `json:"serving_seconds,omitempty"`
	WalkableSeconds float64 `json:"walkable_seconds,omitempty"`
	// UpdatesPerSecond is the backlog's updates over WalkableSeconds
	// (start-up included), or the paced run's produced rate.
	UpdatesPerSecond   float64 `json:"updates_per_second"`
	Rate               float64 `json:"rate,omitempty"`
	Probes             int     `json:"probes,omitempty"`
	WalkableP50Seconds float64 `json:"walkable_p50_seconds,omitempty"`
	WalkableP99Seconds float64 `json:"walkable_p99_seconds,omitempty"`
	PlainP50Seconds    float64 `json:"plain_p50_seconds,omitempty"`
	PlainP99Seconds    float64 `json:"plain_p99_seconds,omitempty"`
	// SettleSeconds is how long a paced run waited for the stage to hold
	// what the edge topic held before its series.
	SettleSeconds float64         `json:"settle_seconds,omitempty"`
	Watermark     map[int32]int64 `json:"edge_offsets,omitempty"`
}

// Summary returns r's figures for a JSON line.
func (r *EdgeResult) Summary() EdgeSummary {
	s := EdgeSummary{Mode: ModeEdges, Phase: r.Phase, Updates: r.Updates, Records: r.Records, ProduceSeconds: r.Produced.Seconds(),
		ServingSeconds: r.Serving.Seconds(), WalkableSeconds: r.Walkable.Seconds(), Rate: r.Rate, Probes: len(r.ToWalkable),
		WalkableP50Seconds: Quantile(r.ToWalkable, 0.5).Seconds(), WalkableP99Seconds: Quantile(r.ToWalkable, 0.99).Seconds(),
		PlainP50Seconds: Quantile(r.Plain, 0.5).Seconds(), PlainP99Seconds: Quantile(r.Plain, 0.99).Seconds(), Watermark: r.Watermark,
		SettleSeconds: r.Settled.Seconds()}
	switch {
	case r.Phase == PhaseProduce:
		s.UpdatesPerSecond = perSecond(float64(r.Updates), r.Produced.Seconds())
	case r.Rate == 0:
		s.UpdatesPerSecond = perSecond(float64(r.Updates), r.Walkable.Seconds())
	default:
		s.UpdatesPerSecond = perSecond(float64(r.Updates), r.Produced.Seconds())
	}
	return s
}
