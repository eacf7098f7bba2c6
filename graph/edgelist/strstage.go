package edgelist

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"unicode/utf8"

	"github.com/walkstage/walkstage/graph/edgelist/extsort"
)

// checkStringID returns what is wrong with b as a string id, or nil.
func checkStringID(b []byte) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("empty")
	case len(b) > extsort.MaxStringIDBytes:
		return fmt.Errorf("%d bytes, longer than %d", len(b), extsort.MaxStringIDBytes)
	case !utf8.Valid(b):
		return fmt.Errorf("not valid UTF-8")
	}
	return nil
}

// A batch place is a staged place with the set (0 sources, 1 targets) in
// bit 8: offset << 9 | set << 8 | shard.
func batchPlace(p int64, set int) int64 { return p>>8<<9 | int64(set)<<8 | p&0xff }

func unbatchPlace(p int64) (place int64, set int) { return p>>9<<8 | p&0xff, int(p >> 8 & 1) }

// stageSrc stages a source id in e and returns its batch place: the
// place of the source before it when they are the same.
func (e *edgeBatch) stageSrc(s []byte, seed maphash.Seed) int64 {
	if e.prevSrc >= 0 {
		p, _ := unbatchPlace(e.prevSrc)
		if bytes.Equal(e.stage[0].Str(p), s) {
			return e.prevSrc
		}
	}
	h := maphash.Bytes(seed, s)
	e.prevSrc = batchPlace(e.stage[0].Add(extsort.ShardOf(h, extsort.DictShards), s, h), 0)
	return e.prevSrc
}

// stageDst stages a target id in e and returns its batch place.
func (e *edgeBatch) stageDst(d []byte, seed maphash.Seed) int64 {
	h := maphash.Bytes(seed, d)
	return batchPlace(e.stage[1].Add(extsort.ShardOf(h, extsort.DictShards), d, h), 1)
}

// batchStr is the string at batch place p of e.
func (e *edgeBatch) batchStr(p int64) []byte {
	q, set := unbatchPlace(p)
	return e.stage[set].Str(q)
}

// joinLoops gives the target of every self-loop among edges from.. of e
// its source's place, so that the run builder sees the loop (s == d) as
// it sees one between int64 ids.
func (e *edgeBatch) joinLoops(from int) {
	for k := from; k < len(e.src); k++ {
		if bytes.Equal(e.batchStr(e.src[k]), e.batchStr(e.dst[k])) {
			e.dst[k] = e.src[k]
		}
	}
}

// stageBatch copies the strings e staged into the run's arenas, shard by
// shard, and notes where each shard's bytes went (stagedBase), for
// placeRange. All the committer does for strings is this: interning them
// one by one as they came, a lookup in a table of all the run's ids (a
// cache miss or two per id), was the import's bottleneck; the decoders
// hash and stage them in parallel, and the sorter interns a whole run at
// once, shard by shard, reading each shard's strings in order with its
// table in cache (extsort.InternRun). A batch cut by a run's end is copied into
// both runs: the strings of the other run's edges become ids of this run's
// set too, which changes nothing, since they are the input's ids anyway.
func (b *runBuilder) stageBatch(e *edgeBatch) {
	st := b.arena
	for set := range e.stage {
		for t := range e.stage[set].Shards {
			src := e.stage[set].Shards[t]
			b.stagedBase[set][t] = int64(len(st.Shards[t]))
			if len(src) > 0 {
				st.Shards[t] = append(st.Shards[t], src...)
				b.arenaBytes += len(src)
			}
		}
	}
	b.stagedBatch = e
}

// placeRange turns the batch places of edges i..j of e into run places,
// in blocks on up to Workers goroutines.
func (b *runBuilder) placeRange(e *edgeBatch, i, j int) {
	base := &b.stagedBase
	run := func(p int64) int64 {
		q, set := unbatchPlace(p)
		t := q & 0xff
		return (q>>8+base[set][t])<<8 | t
	}
	par := max(1, min(b.o.Workers, (j-i)/parallelAppendMin))
	span := (j - i + par - 1) / par
	extsort.ParallelFor(par, func(t int) {
		for k := i + t*span; k < min(j, i+(t+1)*span); k++ {
			e.src[k], e.dst[k] = run(e.src[k]), run(e.dst[k])
		}
	})
}
