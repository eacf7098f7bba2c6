package stage

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/source"
)

// pinSource holds back requests pinned to a graph version that is not
// loaded, up to wait, and turns those still unserved then into
// graph_version_unavailable rejections. Everything else passes through.
type pinSource struct {
	inner Deliveries
	gs    *graphState
	wait  time.Duration
	max   int // held requests at most; then it fetches nothing new

	held    []heldDelivery
	pending chan nextResult // an inner Next running in the background
}

type heldDelivery struct {
	d        *source.Delivery
	deadline time.Time
}

type nextResult struct {
	d   *source.Delivery
	err error
}

func pinnedElsewhere(d *source.Delivery, version string) bool {
	return d.Reject == nil && d.Request != nil && d.Request.GraphVersion != "" && d.Request.GraphVersion != version
}

func (p *pinSource) Next(ctx context.Context) (*source.Delivery, error) {
	for {
		version := p.gs.serving().g.Version
		now := time.Now()
		var next time.Time
		for i, h := range p.held {
			if !pinnedElsewhere(h.d, version) {
				p.held = slices.Delete(p.held, i, i+1)
				return h.d, nil
			}
			if !now.Before(h.deadline) {
				p.held = slices.Delete(p.held, i, i+1)
				return p.reject(h.d, version), nil
			}
			if next.IsZero() || h.deadline.Before(next) {
				next = h.deadline
			}
		}
		var got *nextResult
		switch {
		case len(p.held) == 0 && p.pending == nil:
			// Nothing held: fetch in line, as without pinning.
			d, err := p.inner.Next(ctx)
			got = &nextResult{d, err}
		default:
			if p.pending == nil && len(p.held) < p.max {
				ch := make(chan nextResult, 1)
				p.pending = ch
				go func() {
					d, err := p.inner.Next(ctx)
					ch <- nextResult{d, err}
				}()
			}
			var expiry <-chan time.Time
			if !next.IsZero() {
				timer := time.NewTimer(time.Until(next))
				defer timer.Stop()
				expiry = timer.C
			}
			select {
			case r := <-p.pending:
				p.pending = nil
				got = &r
			case <-p.gs.changes():
			case <-expiry:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if got == nil {
			continue
		}
		if got.err != nil || !pinnedElsewhere(got.d, version) {
			return got.d, got.err
		}
		if p.wait <= 0 {
			return p.reject(got.d, version), nil
		}
		p.held = append(p.held, heldDelivery{d: got.d, deadline: time.Now().Add(p.wait)})
	}
}

func (p *pinSource) reject(d *source.Delivery, version string) *source.Delivery {
	cur := p.gs.serving().g
	return &source.Delivery{Received: d.Received, Ack: d.Ack, Reject: &message.RejectError{
		Reason: ReasonGraphVersionUnavailable, BatchID: d.Request.BatchID,
		Msg: fmt.Sprintf("request is pinned to graph version %s, which did not arrive within %v; this stage serves %s %s",
			d.Request.GraphVersion, p.wait, cur.Name, version)}}
}
