package extsort

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/bits"
	"os"
	"slices"
	"sync/atomic"
)

// String ids ride the int64 pipeline (see graph/edgelist/doc.go). Each run interns its
// strings into a run dictionary and its records carry run-local ids: the
// ranks of their strings among the run's distinct strings in bytewise
// order. A run sorted by local ids is then sorted by string too, and so by
// the dense ids the import gives later (ranks among all the input's
// strings): the map from a run's local ids to dense ids rises, so it keeps
// every order the sort and the merge rely on. The runs are sorted and
// spilled as int runs, each with its sorted strings beside it; the string
// sets are merged into the graph's string table and a local-to-dense map
// per run (MergeStrings); the final merge reads the runs through their
// maps.

// MaxStringIDBytes is the longest string id (docs/reference/graph-format.md).
const MaxStringIDBytes = 1024

// A strRef is a string's place in an arena: offset << strLenBits | length.
const strLenBits = 11 // lengths up to MaxStringIDBytes fit

func mkRef(off, n int) int64 { return int64(off)<<strLenBits | int64(n) }

func refStr(arena []byte, r int64) []byte {
	off := int(r >> strLenBits)
	return arena[off : off+int(r&(1<<strLenBits-1))]
}

// dictShard is one shard of a run dictionary: the strings whose hash picks
// it, in an open-addressing table at most half full. One goroutine fills
// it at a time (InternRun), with the shard small enough to stay in cache.
//
// A slot holds 32 bits of the hash beside the string's arena offset, and
// the arena holds each string after its length and entry number, so a
// lookup reads two places, the slot and the string.
type dictShard struct {
	arena []byte   // per string: uint16 length, uint32 entry, the bytes
	offs  []uint32 // entry -> its place in arena
	table []uint64 // low 32 hash bits << 32 | arena offset + 1; 0 for an empty slot
}

// dictHead is the bytes before each string in a shard's arena.
const dictHead = 6

func (d *dictShard) reset() {
	d.arena, d.offs = d.arena[:0], d.offs[:0]
	clear(d.table)
}

// str is entry e's string.
func (d *dictShard) str(e int) []byte {
	off := int(d.offs[e])
	n := int(binary.LittleEndian.Uint16(d.arena[off:]))
	return d.arena[off+dictHead : off+dictHead+n]
}

// intern returns the entry of b (hash h), adding it if it is new.
func (d *dictShard) intern(b []byte, h uint64) uint32 {
	if 2*(len(d.offs)+1) > len(d.table) {
		d.grow()
	}
	mask := uint64(len(d.table) - 1)
	h32 := uint64(uint32(h))
	for i := h32 & mask; ; i = (i + 1) & mask {
		slot := d.table[i]
		if slot == 0 {
			e := uint32(len(d.offs))
			off := len(d.arena)
			d.table[i] = h32<<32 | uint64(off+1)
			d.offs = append(d.offs, uint32(off))
			d.arena = binary.LittleEndian.AppendUint16(d.arena, uint16(len(b)))
			d.arena = binary.LittleEndian.AppendUint32(d.arena, e)
			d.arena = append(d.arena, b...)
			return e
		}
		if slot>>32 == h32 {
			a := d.arena[uint32(slot)-1:]
			if int(binary.LittleEndian.Uint16(a)) == len(b) && string(a[dictHead:dictHead+len(b)]) == string(b) {
				return binary.LittleEndian.Uint32(a[2:])
			}
		}
	}
}

func (d *dictShard) grow() {
	old := d.table
	d.table = make([]uint64, max(1024, 2*len(old)))
	mask := uint64(len(d.table) - 1)
	for _, slot := range old {
		if slot == 0 {
			continue
		}
		i := (slot >> 32) & mask
		for d.table[i] != 0 {
			i = (i + 1) & mask
		}
		d.table[i] = slot
	}
}

// Dict is a run's string dictionary, in shards that goroutines fill
// in parallel: a string's provisional id is entry*len(shards) + shard
// until SortedStrings ranks it. It belongs to the sorter, which reuses it
// from run to run.
type Dict struct {
	shards []dictShard
}

// DictShards is a run dictionary's shard count: enough that a shard's
// table and strings stay in a core's cache while it is filled (a run of
// 4 Mi edges mentions up to 8 M ids), and more than there are cores. A
// staged string's place keeps its shard in 8 bits.
const DictShards = 256

func NewDict(shards int) *Dict {
	return &Dict{shards: make([]dictShard, max(1, shards))}
}

// ShardOf picks a string's shard from bits of its hash that the shard's
// table does not use for the slot (the low ones).
func ShardOf(h uint64, n int) int { return int(uint32(h>>40) % uint32(n)) }

func (rd *Dict) Reset() {
	for i := range rd.shards {
		rd.shards[i].reset()
	}
}

// Staged are a run's string ids as the committer hands them to the
// sorter, in one arena a dictionary shard: each once per mention (but once
// for a source repeated on consecutive edges, or a self-loop's two ends),
// as its hash, its length as a uint16 and its bytes. Until the sorter
// interns them, a record's s and d are places: offset << 8 | shard.
type Staged struct {
	Shards [DictShards][]byte
}

const stageHead = 10

// NewStaged returns arenas with room for limit bytes in all, so a
// run's arenas never grow by copying (room never touched costs address
// space only).
func NewStaged(limit int) *Staged {
	st := &Staged{}
	for i := range st.Shards {
		st.Shards[i] = make([]byte, 0, limit/DictShards+limit/DictShards/8)
	}
	return st
}

func (st *Staged) Reset() {
	for i := range st.Shards {
		st.Shards[i] = st.Shards[i][:0]
	}
}

func stagedAt(place int64) (shard int, off int64) { return int(place & 0xff), place >> 8 }

func (st *Staged) Str(place int64) []byte {
	t, off := stagedAt(place)
	a := st.Shards[t]
	n := int64(binary.LittleEndian.Uint16(a[off+8:]))
	return a[off+stageHead : off+stageHead+n]
}

// Add stages string s with hash h in shard t and returns its place.
func (st *Staged) Add(t int, s []byte, h uint64) int64 {
	a := st.Shards[t]
	n := len(a)
	if need := n + stageHead + len(s); need <= cap(a) {
		a = a[:need]
	} else {
		a = slices.Grow(a, stageHead+len(s))[:need]
	}
	binary.LittleEndian.PutUint64(a[n:], h)
	binary.LittleEndian.PutUint16(a[n+8:], uint16(len(s)))
	copy(a[n+stageHead:], s)
	st.Shards[t] = a
	return int64(n)<<8 | int64(t)
}

// InternRun interns a run's staged strings, shard by shard on up to par
// goroutines, and replaces the records' places by provisional ids. Each
// staged string's hash is overwritten by its id, so the records' ends then
// find theirs with one independent load each.
func (rd *Dict) InternRun(recs []Rec, st *Staged, par int) {
	ns := len(rd.shards)
	if par < 2 || len(recs) < parallelRadixMin {
		par = 1
	}
	var next atomic.Int64
	ParallelFor(par, func(int) {
		for t := int(next.Add(1) - 1); t < ns; t = int(next.Add(1) - 1) {
			sh, a := &rd.shards[t], st.Shards[t]
			for off := 0; off < len(a); {
				n := int(binary.LittleEndian.Uint16(a[off+8:]))
				id := uint64(sh.intern(a[off+stageHead:off+stageHead+n], binary.LittleEndian.Uint64(a[off:])))*uint64(ns) + uint64(t)
				binary.LittleEndian.PutUint64(a[off:], id)
				off += stageHead + n
			}
		}
	})
	id := func(place int64) int64 {
		t, off := stagedAt(place)
		return int64(binary.LittleEndian.Uint64(st.Shards[t][off:]))
	}
	span := (len(recs) + par - 1) / par
	ParallelFor(par, func(t int) {
		for i := t * span; i < min(len(recs), (t+1)*span); i++ {
			r := &recs[i]
			r.S, r.D = id(r.S), id(r.D)
		}
	})
}

// StrSet is a run's distinct strings in bytewise order.
type StrSet struct {
	arena []byte
	Refs  []int64
}

// SortedStrings ranks the run's strings: it returns them in bytewise order
// and rank[p], the rank of the string with provisional id p. The strings
// are radix sorted on the 8 bytes after their common prefix, and runs of
// equal keys are finished by comparison.
func (rd *Dict) SortedStrings(rs *Sorter) (StrSet, []uint32) {
	ns := len(rd.shards)
	var n, most, size int
	for t := range rd.shards {
		n += len(rd.shards[t].offs)
		most = max(most, len(rd.shards[t].offs))
		size += len(rd.shards[t].arena)
	}
	rank := make([]uint32, most*ns)
	if n == 0 {
		return StrSet{}, rank
	}
	str := func(p uint32) []byte { return rd.shards[int(p)%ns].str(int(p) / ns) }
	var first []byte
	for t := range rd.shards {
		if len(rd.shards[t].offs) > 0 {
			first = rd.shards[t].str(0)
			break
		}
	}
	cp := len(first)
	for t := range rd.shards {
		sh := &rd.shards[t]
		for i := range sh.offs {
			s := sh.str(i)
			k := 0
			for k < cp && k < len(s) && s[k] == first[k] {
				k++
			}
			cp = k
		}
	}
	if cap(rs.a) < n {
		rs.a, rs.b = make([]KV, n), make([]KV, n)
	}
	a, b := rs.a[:0], rs.b[:n]
	lo, hi := ^uint64(0), uint64(0)
	for t := range rd.shards {
		sh := &rd.shards[t]
		for i := range sh.offs {
			k := prefixKey(sh.str(i)[cp:])
			a = append(a, KV{Key: k, Idx: uint32(i*ns + t)})
			lo, hi = min(lo, k), max(hi, k)
		}
	}
	for i := range a {
		a[i].Key -= lo
	}
	sorted := radixSortKV(a, b, bits.Len64(hi-lo), rs.Par)
	for i := 0; i < n; {
		j := i + 1
		for j < n && sorted[j].Key == sorted[i].Key {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(sorted[i:j], func(x, y KV) int { return bytes.Compare(str(x.Idx)[cp:], str(y.Idx)[cp:]) })
		}
		i = j
	}
	out := StrSet{Refs: make([]int64, n), arena: make([]byte, 0, size)}
	for r, x := range sorted {
		s := str(x.Idx)
		out.Refs[r] = mkRef(len(out.arena), len(s))
		out.arena = append(out.arena, s...)
		rank[x.Idx] = uint32(r)
	}
	return out, rank
}

// prefixKey is the first 8 bytes of s as a big-endian number, zero padded:
// keys in order are strings in order (a shorter string pads with the
// smallest byte).
func prefixKey(s []byte) uint64 {
	if len(s) >= 8 {
		return binary.BigEndian.Uint64(s)
	}
	var b [8]byte
	copy(b[:], s)
	return binary.BigEndian.Uint64(b[:])
}

// EncodeStrings writes a sorted string set as uvarint length and bytes
// each.
func EncodeStrings(w *bufio.Writer, set StrSet) error {
	var buf [binary.MaxVarintLen64]byte
	for _, r := range set.Refs {
		s := refStr(set.arena, r)
		n := binary.PutUvarint(buf[:], uint64(len(s)))
		if _, err := w.Write(buf[:n]); err != nil {
			return err
		}
		if _, err := w.Write(s); err != nil {
			return err
		}
	}
	return nil
}

// strReader streams one run's sorted strings: from memory or from the
// file EncodeStrings wrote.
type strReader struct {
	run  int
	set  StrSet // when never spilled
	i    int
	r    *bufio.Reader
	f    *os.File
	name string
	cur  []byte
	buf  []byte
	left int // strings still to read from the file
}

func (s *strReader) next() (bool, error) {
	if s.r == nil {
		if s.i == len(s.set.Refs) {
			return false, nil
		}
		s.cur = refStr(s.set.arena, s.set.Refs[s.i])
		s.i++
		return true, nil
	}
	if s.left == 0 {
		return false, nil
	}
	s.left--
	n, err := binary.ReadUvarint(s.r)
	if err == nil && (n == 0 || n > MaxStringIDBytes) {
		err = fmt.Errorf("string of %d bytes", n)
	}
	if err == nil {
		s.buf = slices.Grow(s.buf[:0], int(n))[:n]
		_, err = io.ReadFull(s.r, s.buf)
	}
	if err != nil {
		return false, fmt.Errorf("read back string run %s: %w", s.name, err)
	}
	s.cur = s.buf
	return true, nil
}

// StringTable is the merged string id map: dense id v's string is
// strbytes[offs[v]:offs[v+1]], strbytes in a temporary file.
type StringTable struct {
	Offs  []uint64
	Path  string // the strings, back to back
	Bytes uint64
}

// MergeStrings merges the runs' string sets into the graph's string table,
// written to a temporary file in dir, and gives each run the map from its
// local ids to dense ids (Run.remap). The in-memory run's records are
// rewritten in dense ids, and every run's marks name dense sources.
func MergeStrings(ctx context.Context, runs []Run, dir string) (*StringTable, error) {
	var srcs []*strReader
	defer func() {
		for _, s := range srcs {
			if s.f != nil {
				s.f.Close()
			}
		}
	}()
	for i := range runs {
		rf := &runs[i]
		s := &strReader{run: i, set: rf.Strs}
		if rf.StrPath != "" {
			f, err := os.Open(rf.StrPath)
			if err != nil {
				return nil, fmt.Errorf("read back string run: %w", err)
			}
			s.f, s.r, s.name, s.left = f, bufio.NewReaderSize(f, 64<<10), rf.StrPath, int(rf.NStrs)
		}
		rf.Remap = make([]uint32, 0, rf.NStrs)
		srcs = append(srcs, s)
	}
	out, err := os.CreateTemp(dir, "walkstage-strings-*")
	if err != nil {
		return nil, fmt.Errorf("spill strings: %w", err)
	}
	t := &StringTable{Path: out.Name(), Offs: []uint64{0}}
	ok := false
	defer func() {
		if !ok {
			out.Close()
			os.Remove(t.Path)
		}
	}()
	w := bufio.NewWriterSize(out, 1<<20)
	// A heap of the sources by (current string, run).
	h := make([]*strReader, 0, len(srcs))
	less := func(a, b *strReader) bool {
		if c := bytes.Compare(a.cur, b.cur); c != 0 {
			return c < 0
		}
		return a.run < b.run
	}
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && less(h[c+1], h[c]) {
				c++
			}
			if !less(h[c], h[i]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for _, s := range srcs {
		more, err := s.next()
		if err != nil {
			return nil, err
		}
		if more {
			h = append(h, s)
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	var last []byte
	var v uint32
	for n := 0; len(h) > 0; n++ {
		top := h[0]
		if len(t.Offs) == 1 || !bytes.Equal(top.cur, last) {
			if len(t.Offs) > 1 {
				v++
			}
			if _, err := w.Write(top.cur); err != nil {
				return nil, fmt.Errorf("spill strings: %w", err)
			}
			t.Bytes += uint64(len(top.cur))
			t.Offs = append(t.Offs, t.Bytes)
			last = append(last[:0], top.cur...)
		}
		runs[top.run].Remap = append(runs[top.run].Remap, v)
		more, err := top.next()
		if err != nil {
			return nil, err
		}
		if !more {
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		down(0)
		if n&0xffff == 0 && ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("spill strings: %w", err)
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("spill strings: %w", err)
	}
	ok = true
	for i := range runs {
		rf := &runs[i]
		if int64(len(rf.Remap)) != rf.NStrs {
			os.Remove(t.Path)
			return nil, fmt.Errorf("string run %d: %d strings, %d mapped (internal error)", i, rf.NStrs, len(rf.Remap))
		}
		for j := range rf.Marks {
			rf.Marks[j].S = int64(rf.Remap[rf.Marks[j].S])
		}
		if rf.Mem != nil {
			for j := range rf.Mem {
				r := &rf.Mem[j]
				r.S, r.D = int64(rf.Remap[r.S]), int64(rf.Remap[r.D])
			}
			rf.Remap = nil
		}
	}
	return t, nil
}
