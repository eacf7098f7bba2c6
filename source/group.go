package source

// The consumer group: which partitions of the input topic this consumer
// reads, from which offset, and whether each partition's log is still the
// one its offsets were counted in.
//
// kafka-go's group Reader hides all three, and each hid a loss (issue 32):
// its partition watcher compares the partition count with the count it read
// itself at the start of a generation, so a topic created between the
// leader's assignment and that read stays unassigned for good; a committed
// offset beyond the log end makes it wait silently until the new log grows
// past it, skipping every record in between; and it cannot be told to read a
// partition again from its start. So the consumer runs kafka-go's
// ConsumerGroup itself and one partition reader per assigned partition.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/internal/ctxsleep"
)

// fetched is what a partition reader hands to Next.
type fetched struct {
	m     kafka.Message
	epoch uint64 // the partition's log epoch when m was fetched
	err   error
}

// partReader reads one assigned partition for one generation.
type partReader struct {
	part int
	pos  atomic.Int64 // the next offset to hand to Next
	mu   sync.Mutex
	// recheck ends the current fetch so that the reader checks its
	// position against the partition's log again.
	recheck context.CancelFunc
}

func (pr *partReader) requestRecheck() {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.recheck != nil {
		pr.recheck()
	}
}

// errRevoked: the partition is not this consumer's in the current
// generation; its new owner reads it again from the group's offset.
var errRevoked = errors.New("partition not assigned to this consumer")

// runGroup follows the group's generations until ctx ends or the group is
// closed.
func (c *Consumer) runGroup(ctx context.Context) {
	defer c.wg.Done()
	for attempt := 1; ; attempt++ {
		gen, err := c.cg.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				return
			}
			c.fetchErrs.print(fmt.Sprintf("consumer group %s: %v", c.group, err))
			if ctxsleep.Sleep(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) != nil {
				return
			}
			continue
		}
		attempt = 0
		parts := gen.Assignments[c.topic]
		readers := make(map[int]*partReader, len(parts))
		for _, pa := range parts {
			pr := &partReader{part: pa.ID}
			pr.pos.Store(-1) // not positioned yet
			readers[pa.ID] = pr
		}
		c.genMu.Lock()
		c.gen, c.readers = gen, readers
		close(c.genChanged)
		c.genChanged = make(chan struct{})
		c.genMu.Unlock()
		c.joined.Store(true)
		c.lagMu.Lock()
		for k := range c.lag {
			if readers[k.part] == nil {
				delete(c.lag, k) // no longer ours: its lag is its new owner's
			}
		}
		c.lagMu.Unlock()
		ids := make([]int, 0, len(parts))
		for _, pa := range parts {
			ids = append(ids, pa.ID)
			pr, groupNext := readers[pa.ID], pa.Offset
			gen.Start(func(ctx context.Context) { c.readPartition(ctx, pr, groupNext) })
		}
		slices.Sort(ids)
		c.log.Debug("consumer group generation", "generation", gen.ID, "partitions", ids)
		gen.Start(func(ctx context.Context) { c.watchGeneration(ctx, readers) })
	}
}

// readPartition hands the partition's records to Next from the group's
// offset (kafka.FirstOffset when the group has none) until the generation
// ends. Before every (re)start it checks its position against the log.
func (c *Consumer) readPartition(ctx context.Context, pr *partReader, groupNext int64) {
	pos := int64(-1)
	replaced := false // the last fetch found the log replaced
	for attempt := 0; ; attempt++ {
		if attempt > 0 && ctxsleep.Sleep(ctx, min(time.Duration(attempt)*200*time.Millisecond, 5*time.Second)) != nil {
			return
		}
		first, last, err := c.topics.bounds(ctx, c.topic, pr.part)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.fetchErrs.print(fmt.Sprintf("offsets of partition %d of %s: %v", pr.part, c.topic, err))
			continue
		}
		switch {
		case pos < 0:
			pos = c.startAt(ctx, pr.part, groupNext, first, last)
		case replaced:
			pos = c.logReset(ctx, pr.part, errLogReplaced.Error(), pos, first)
		case pos >= first && pos <= last && !c.sameLog(ctx, pr.part, first, last):
			pos = c.logReset(ctx, pr.part, "the record this consumer read last is not at its offset any more", pos, first)
		case pos > last:
			pos = c.logReset(ctx, pr.part, fmt.Sprintf("the next offset to read (%d) is beyond the log end (%d)", pos, last), pos, first)
		case pos < first:
			c.log.Warn("records of the input partition were removed before they were read (retention or deleted records); skipping to the oldest left",
				"partition", pr.part, "old_offset", pos, "new_offset", first)
			pos = first
		}
		replaced = false
		pr.pos.Store(pos)
		err = c.fetchFrom(ctx, pr)
		if pr.pos.Load() > pos {
			attempt = 0 // records came: earlier failures have passed
		}
		pos = pr.pos.Load()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			attempt = -1 // a recheck: at once
			continue
		}
		if errors.Is(err, kafka.OffsetOutOfRange) {
			attempt = 0 // checked after the shortest pause
			continue
		}
		if errors.Is(err, errLogReplaced) {
			replaced = true
			attempt = -1 // reset at once, from the log's bounds
			continue
		}
		if attempt >= fetchFailuresReported {
			select {
			case c.msgs <- fetched{err: err}: // Next reports it as the broker's trouble
			default:
			}
		}
	}
}

// fetchFailuresReported is how many fetches of a partition in a row fail
// (a couple of seconds of back-off) before Next reports the broker's
// trouble: one that answers after a leader moves or a topic is created is
// not an outage.
const fetchFailuresReported = 5

// fetchFrom reads from pr.pos until ctx ends, a recheck is asked for (nil)
// or a fetch fails. Before it hands on the records of a fetch, it checks
// that the log still holds, at its offset, the last record it handed on:
// a topic deleted and created again between two fetches (or a broker back
// without its data) that has grown past the position answers the next
// fetch with the new log's records as if nothing happened, and the
// periodic checks come too late, once the mark is one of the new log's
// records. Offsets cannot tell the logs apart, and kafka-go does not
// expose topic ids; the records can. One extra fetch of a record per
// answer that brings records: nothing while the partition is idle.
func (c *Consumer) fetchFrom(ctx context.Context, pr *partReader) error {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pr.mu.Lock()
	pr.recheck = cancel
	pr.mu.Unlock()
	epoch := c.trk.epoch(c.topic, pr.part)
	for {
		pos := pr.pos.Load()
		msgs, err := c.topics.fetch(fctx, c.topic, pr.part, pos, c.maxBytes)
		if fctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.kafkaErrLog.Printf("%v", err)
			return err
		}
		msgs = slices.DeleteFunc(msgs, func(m kafka.Message) bool { return m.Offset < pos })
		if len(msgs) == 0 {
			continue
		}
		if err := c.continues(fctx, pr.part, pos); err != nil {
			if fctx.Err() != nil {
				return nil
			}
			return err
		}
		for _, m := range msgs {
			select {
			case c.msgs <- fetched{m: m, epoch: epoch}:
				pr.pos.Store(m.Offset + 1)
				c.setMark(pr.part, markOf(m))
			case <-fctx.Done():
				return nil
			}
		}
	}
}

// errLogReplaced: the partition's log no longer holds the last record this
// consumer handed on from it.
var errLogReplaced = errors.New("the record this consumer read last is not at its offset any more")

// continues checks that records from pos on, just fetched, continue the
// log this consumer read: the record before pos is still the one it handed
// on last (errLogReplaced if not). No mark to compare (nothing read since
// the start or a reset) or a record removed by retention passes; a check
// that fails is an error, never a pass.
func (c *Consumer) continues(ctx context.Context, part int, pos int64) error {
	c.marksMu.Lock()
	mk, ok := c.marks[part]
	c.marksMu.Unlock()
	if !ok || mk.off != pos-1 {
		return nil
	}
	now, ok, err := c.topics.markAt(ctx, c.topic, part, mk.off)
	switch {
	case err != nil:
		return fmt.Errorf("check the log of partition %d before handing on its records: %w", part, err)
	case ok && now != mk:
		return errLogReplaced
	}
	return nil
}

// sameLog reports whether the partition's log still holds, at its offset,
// the last record this consumer handed on from it (in any generation). A
// topic deleted and created again (or a broker back without its data) that
// has grown past the reader's position, or past the group's offset, which
// a broker may keep for a deleted topic, answers every offset check as
// before; only the records tell the logs apart. True when there is nothing
// to compare or the broker cannot say: a failed check is no evidence, and
// the next one comes within MetadataInterval.
func (c *Consumer) sameLog(ctx context.Context, part int, first, last int64) bool {
	c.marksMu.Lock()
	mk, ok := c.marks[part]
	c.marksMu.Unlock()
	if !ok || mk.off < first || mk.off >= last {
		return true
	}
	now, ok, err := c.topics.markAt(ctx, c.topic, part, mk.off)
	if err != nil || !ok {
		return true
	}
	return now == mk
}

func (c *Consumer) setMark(part int, mk recordMark) {
	c.marksMu.Lock()
	defer c.marksMu.Unlock()
	if c.marks == nil {
		c.marks = make(map[int]recordMark)
	}
	c.marks[part] = mk
}

// startAt decides where a partition assigned in a new generation is read
// from, given the group's offset (negative: none) and the log's bounds.
func (c *Consumer) startAt(ctx context.Context, part int, groupNext, first, last int64) int64 {
	known := c.trk.lastCommitted(c.topic, part) + 1 // 0: this consumer committed nothing in this log
	if !c.sameLog(ctx, part, first, last) {
		return c.logReset(ctx, part, "the record this consumer read last is not at its offset any more", max(groupNext, known), first)
	}
	switch {
	case groupNext < 0 && known > 0:
		return c.logReset(ctx, part, "the group's committed offset is gone", known, first)
	case groupNext < 0:
		return first // a new group starts at the oldest retained request
	case groupNext > last:
		return c.logReset(ctx, part, fmt.Sprintf("the group's committed offset (%d) is beyond the log end (%d)", groupNext, last),
			groupNext, first)
	case groupNext < first:
		c.log.Warn("records of the input partition were removed before they were read (retention or deleted records); skipping to the oldest left",
			"partition", part, "old_offset", groupNext, "new_offset", first)
		c.trk.caughtUp(c.topic, part, first)
		return first
	case groupNext < known:
		// Not proof of a replaced log (a replaced log has no group offset,
		// or one beyond its end, both above): after a broker stall, a
		// commit sent before it, timed out here and retried, can land
		// after the later commit that succeeded (the chaos suite's broker
		// SIGSTOP did this). Read again from the group's offset under a
		// new epoch: the records in between are redelivered (their outputs
		// are found by Lookup, their dead letters by offset and timestamp
		// in the index, which is kept), none is skipped, and the first
		// acknowledgement moves the group's offset forward again.
		c.trk.reset(c.topic, part, groupNext)
		c.log.Info("the group's committed offset is below this consumer's last commit (a stale commit landed late); reading again from it",
			"partition", part, "group_offset", groupNext, "committed", known)
		return groupNext
	}
	c.trk.caughtUp(c.topic, part, groupNext)
	return groupNext
}

// logReset handles a partition whose log was replaced: the tracker starts a
// new epoch at next (acknowledgements of records of the old log commit
// nothing), the dead-letter index forgets the partition's copies (their
// offsets now name other records), the group's offset is set to next, and
// the reset is logged and counted. It returns next.
func (c *Consumer) logReset(ctx context.Context, part int, why string, old, next int64) int64 {
	c.trk.reset(c.topic, part, next)
	c.marksMu.Lock()
	delete(c.marks, part)
	c.marksMu.Unlock()
	dropped := c.dlqIdx.forget(c.topic, part)
	c.resets.Add(1)
	c.lagMu.Lock()
	delete(c.lag, tp{c.topic, part})
	delete(c.delivered, tp{c.topic, part})
	c.lagMu.Unlock()
	c.log.Warn("input partition's log was replaced (a broker back without its data, or the topic created again): reading it from its new start",
		"partition", part, "reason", why, "old_offset", old, "new_offset", next, "dead_letter_index_entries_dropped", dropped)
	// A group offset beyond the new log would send the next owner past
	// records it never read; one in the old log's range would skip them.
	cctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	select {
	case c.commitSem <- struct{}{}:
		defer func() { <-c.commitSem }()
	case <-cctx.Done():
		return next
	}
	if err := c.commitOffset(cctx, part, next); err != nil && !errors.Is(err, errRevoked) {
		c.log.Info("setting the group's offset to the new log's start failed; the next acknowledgement sets it",
			"partition", part, "offset", next, "err", err)
	}
	return next
}

// commitOffset commits next as the partition's offset in the current
// generation, waiting for one while the group rebalances. The caller holds
// commitSem.
func (c *Consumer) commitOffset(ctx context.Context, part int, next int64) error {
	var lastErr error
	for {
		c.genMu.Lock()
		gen, changed, mine := c.gen, c.genChanged, c.readers[part] != nil
		c.genMu.Unlock()
		if gen != nil {
			if !mine {
				return errRevoked
			}
			lastErr = gen.CommitOffsets(map[string]map[int]int64{c.topic: {part: next}})
			if lastErr == nil {
				return nil
			}
		}
		select {
		case <-changed:
		case <-time.After(time.Second):
		case <-c.stop:
			return ErrClosed
		case <-ctx.Done():
			if lastErr == nil {
				lastErr = ctx.Err()
			}
			return lastErr
		}
	}
}

// watchGeneration checks, every MetadataInterval while the generation
// lasts, that the group reads every partition of the input topic (and ends
// the generation, which makes the group rebalance, when it does not) and
// that no partition's log ended below this consumer's position.
func (c *Consumer) watchGeneration(ctx context.Context, readers map[int]*partReader) {
	t := time.NewTicker(c.metadataInterval)
	defer t.Stop()
	began := time.Now()
	for {
		if c.checkAssignment(ctx) && time.Since(began) >= c.metadataInterval {
			// At most one rebalance per interval: a leader with stale
			// metadata assigns the same again, and the next check asks again.
			c.log.Info("the group does not read every partition of the input topic: rejoining so that it is assigned again",
				"reason", c.Consuming())
			return
		}
		c.checkLogs(ctx, readers)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// checkAssignment compares the input topic's partitions with what the
// group's members are assigned, records the answer for Consuming, and
// reports whether the group must be assigned again. A failed look-up changes
// nothing.
func (c *Consumer) checkAssignment(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	n, err := c.topics.partitions(ctx, c.topic)
	if err != nil {
		return false
	}
	if n == 0 {
		c.setAssignment(0, fmt.Errorf("input topic %q does not exist", c.topic))
		return false
	}
	res, err := c.topics.client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{c.group}})
	if err != nil || len(res.Groups) != 1 || res.Groups[0].Error != nil {
		return false
	}
	g := res.Groups[0]
	if g.GroupState != "Stable" {
		return false // a rebalance is under way: its outcome is checked next time
	}
	covered := map[int]bool{}
	for _, m := range g.Members {
		for _, t := range m.MemberAssignments.Topics {
			if t.Topic != c.topic {
				continue
			}
			for _, p := range t.Partitions {
				covered[p] = true
			}
		}
	}
	missing := 0
	for p := range n {
		if !covered[p] {
			missing++
		}
	}
	if missing == 0 {
		c.setAssignment(0, nil)
		return false
	}
	c.setAssignment(missing, fmt.Errorf("group %q reads %d of input topic %q's %d partitions", c.group, n-missing, c.topic, n))
	return true
}

// checkLogs asks for the end of each partition this consumer reads: one
// that ended below the reader's position was replaced, and the reader checks
// again. The same answer gives the lag of partitions with nothing fetched.
func (c *Consumer) checkLogs(ctx context.Context, readers map[int]*partReader) {
	if len(readers) == 0 {
		return
	}
	parts := make([]int, 0, len(readers))
	for p := range readers {
		parts = append(parts, p)
	}
	ctx, cancel := context.WithTimeout(ctx, c.callTimeout)
	defer cancel()
	ends, err := c.topics.ends(ctx, c.topic, parts...)
	if err != nil {
		return
	}
	for p, last := range ends {
		pr := readers[p]
		if pos := pr.pos.Load(); pos > last || (pos >= 0 && !c.sameLog(ctx, p, 0, last)) {
			pr.requestRecheck()
		} else if pos >= 0 {
			c.lagMu.Lock()
			if d, ok := c.delivered[tp{c.topic, p}]; ok {
				pos = max(pos, d)
			}
			c.lag[tp{c.topic, p}] = max(0, last-pos)
			c.lagMu.Unlock()
		}
	}
}

func (c *Consumer) setAssignment(unassigned int, err error) {
	c.assignMu.Lock()
	defer c.assignMu.Unlock()
	c.unassigned, c.assignErr = unassigned, err
}

// Consuming is nil while the input topic exists and the group reads every
// one of its partitions (as of the last check, every MetadataInterval);
// otherwise it says what is missing. A replica with no partition of its
// own in a group that reads them all is consuming.
func (c *Consumer) Consuming() error {
	c.assignMu.Lock()
	defer c.assignMu.Unlock()
	return c.assignErr
}

// UnassignedPartitions is the number of the input topic's partitions no
// member of the group reads, as of the last check.
func (c *Consumer) UnassignedPartitions() int {
	c.assignMu.Lock()
	defer c.assignMu.Unlock()
	return c.unassigned
}

// LogResets counts the input partitions found with their log replaced
// since the consumer started.
func (c *Consumer) LogResets() int64 { return c.resets.Load() }

// assignedNow lists the partitions this consumer reads in the current
// generation.
func (c *Consumer) assignedNow() []int {
	c.genMu.Lock()
	defer c.genMu.Unlock()
	ps := make([]int, 0, len(c.readers))
	for p := range c.readers {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}
