package edgelist

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"os"
	"slices"
	"unicode/utf8"
)

// String ids ride the int64 pipeline (see doc.go). Each run interns its
// strings into a run dictionary and its records carry run-local ids: the
// ranks of their strings among the run's distinct strings in bytewise
// order. A run sorted by local ids is then sorted by string too, and so by
// the dense ids the import gives later (ranks among all the input's
// strings): the map from a run's local ids to dense ids rises, so it keeps
// every order the sort and the merge rely on. The runs are sorted and
// spilled as int runs, each with its sorted strings beside it; the string
// sets are merged into the graph's string table and a local-to-dense map
// per run (mergeStrings); the final merge reads the runs through their
// maps.

// maxStringIDBytes is the longest string id (docs/reference/graph-format.md).
const maxStringIDBytes = 1024

// A strRef is a string's place in an arena: offset << strLenBits | length.
const strLenBits = 11 // lengths up to maxStringIDBytes fit

func mkRef(off, n int) int64 { return int64(off)<<strLenBits | int64(n) }

func refStr(arena []byte, r int64) []byte {
	off := int(r >> strLenBits)
	return arena[off : off+int(r&(1<<strLenBits-1))]
}

// checkStringID returns what is wrong with b as a string id, or nil.
func checkStringID(b []byte) error {
	switch {
	case len(b) == 0:
		return fmt.Errorf("empty")
	case len(b) > maxStringIDBytes:
		return fmt.Errorf("%d bytes, longer than %d", len(b), maxStringIDBytes)
	case !utf8.Valid(b):
		return fmt.Errorf("not valid UTF-8")
	}
	return nil
}

// appendStringID adds a validated string id to an arena and returns its
// reference and hash.
func appendStringID(arena *[]byte, b []byte, seed maphash.Seed) (int64, uint64) {
	off := len(*arena)
	*arena = append(*arena, b...)
	return mkRef(off, len(b)), maphash.Bytes(seed, b)
}

// dictShard is one goroutine's share of a run dictionary: the strings whose
// hash picks it, in an open-addressing table at most half full.
type dictShard struct {
	arena  []byte
	refs   []int64  // entry -> its string in arena
	hashes []uint64 // entry -> its hash, to grow the table without the strings
	table  []uint32 // entry+1, 0 for an empty slot
}

func (d *dictShard) reset() {
	d.arena, d.refs, d.hashes = d.arena[:0], d.refs[:0], d.hashes[:0]
	clear(d.table)
}

// intern returns the entry of b (hash h), adding it if it is new.
func (d *dictShard) intern(b []byte, h uint64) uint32 {
	if 2*(len(d.refs)+1) > len(d.table) {
		d.grow()
	}
	mask := uint64(len(d.table) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		e := d.table[i]
		if e == 0 {
			n := uint32(len(d.refs))
			d.table[i] = n + 1
			d.refs = append(d.refs, mkRef(len(d.arena), len(b)))
			d.hashes = append(d.hashes, h)
			d.arena = append(d.arena, b...)
			return n
		}
		if d.hashes[e-1] == h && bytes.Equal(refStr(d.arena, d.refs[e-1]), b) {
			return e - 1
		}
	}
}

func (d *dictShard) grow() {
	d.table = make([]uint32, max(1024, 2*len(d.table)))
	mask := uint64(len(d.table) - 1)
	for e, h := range d.hashes {
		i := h & mask
		for d.table[i] != 0 {
			i = (i + 1) & mask
		}
		d.table[i] = uint32(e) + 1
	}
}

// runDict is a run's string dictionary: shards interned in parallel. A
// string's provisional id is entry*len(shards) + shard until sortedStrings
// ranks it.
type runDict struct {
	shards []dictShard
}

func newRunDict(shards int) *runDict {
	return &runDict{shards: make([]dictShard, max(1, shards))}
}

// shardOf picks a string's shard from bits of its hash that the shard's
// table does not use for the slot (the low ones).
func shardOf(h uint64, n int) int { return int(uint32(h>>40) % uint32(n)) }

// bytes is the dictionary's arena size.
func (rd *runDict) bytes() int {
	n := 0
	for i := range rd.shards {
		n += len(rd.shards[i].arena)
	}
	return n
}

func (rd *runDict) reset() {
	for i := range rd.shards {
		rd.shards[i].reset()
	}
}

// internRange replaces the string references of edges i..j of e by
// provisional ids, one goroutine a shard.
func (rd *runDict) internRange(e *edgeBatch, i, j int) {
	ns := len(rd.shards)
	do := func(t int) {
		sh := &rd.shards[t]
		for k := i; k < j; k++ {
			if ns == 1 || shardOf(e.hs[k], ns) == t {
				e.src[k] = int64(sh.intern(refStr(e.strs[0], e.src[k]), e.hs[k]))*int64(ns) + int64(t)
			}
			if ns == 1 || shardOf(e.hd[k], ns) == t {
				e.dst[k] = int64(sh.intern(refStr(e.strs[1], e.dst[k]), e.hd[k]))*int64(ns) + int64(t)
			}
		}
	}
	if ns == 1 || j-i < 1024 {
		for t := range ns {
			do(t)
		}
		return
	}
	parallelFor(ns, do)
}

// strSet is a run's distinct strings in bytewise order.
type strSet struct {
	arena []byte
	refs  []int64
}

// sortedStrings ranks the run's strings: it returns them in bytewise order
// and rank[p], the rank of the string with provisional id p. The strings
// are radix sorted on the 8 bytes after their common prefix, and runs of
// equal keys are finished by comparison.
func (rd *runDict) sortedStrings(rs *runSorter) (strSet, []uint32) {
	ns := len(rd.shards)
	var n, most int
	for t := range rd.shards {
		n += len(rd.shards[t].refs)
		most = max(most, len(rd.shards[t].refs))
	}
	rank := make([]uint32, most*ns)
	if n == 0 {
		return strSet{}, rank
	}
	// str(g) for g = the entries of shard 0, then shard 1, ...
	base := make([]int, ns+1)
	for t := range rd.shards {
		base[t+1] = base[t] + len(rd.shards[t].refs)
	}
	shardOfEntry := func(g int) int {
		t := 0
		for base[t+1] <= g {
			t++
		}
		return t
	}
	str := func(t, i int) []byte { return refStr(rd.shards[t].arena, rd.shards[t].refs[i]) }
	first := str(shardOfEntry(0), 0)
	cp := len(first)
	for t := range rd.shards {
		for i := range rd.shards[t].refs {
			s := str(t, i)
			k := 0
			for k < cp && k < len(s) && s[k] == first[k] {
				k++
			}
			cp = k
		}
	}
	if cap(rs.a) < n {
		rs.a, rs.b = make([]kv, n), make([]kv, n)
	}
	a, b := rs.a[:n], rs.b[:n]
	lo, hi := ^uint64(0), uint64(0)
	for t := range rd.shards {
		for i := range rd.shards[t].refs {
			k := prefixKey(str(t, i)[cp:])
			a[base[t]+i] = kv{key: k, idx: uint32(base[t] + i)}
			lo, hi = min(lo, k), max(hi, k)
		}
	}
	for i := range a {
		a[i].key -= lo
	}
	sorted := radixSortKV(a, b, bits.Len64(hi-lo), rs.par)
	at := func(x kv) []byte {
		t := shardOfEntry(int(x.idx))
		return str(t, int(x.idx)-base[t])
	}
	for i := 0; i < n; {
		j := i + 1
		for j < n && sorted[j].key == sorted[i].key {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(sorted[i:j], func(x, y kv) int { return bytes.Compare(at(x)[cp:], at(y)[cp:]) })
		}
		i = j
	}
	var out strSet
	out.refs = make([]int64, n)
	size := 0
	for t := range rd.shards {
		size += len(rd.shards[t].arena)
	}
	out.arena = make([]byte, 0, size)
	for r, x := range sorted {
		t := shardOfEntry(int(x.idx))
		i := int(x.idx) - base[t]
		s := str(t, i)
		out.refs[r] = mkRef(len(out.arena), len(s))
		out.arena = append(out.arena, s...)
		rank[i*ns+t] = uint32(r)
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

// encodeStrings writes a sorted string set as uvarint length and bytes
// each.
func encodeStrings(w *bufio.Writer, set strSet) error {
	var buf [binary.MaxVarintLen64]byte
	for _, r := range set.refs {
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
// file encodeStrings wrote.
type strReader struct {
	run  int
	set  strSet // when never spilled
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
		if s.i == len(s.set.refs) {
			return false, nil
		}
		s.cur = refStr(s.set.arena, s.set.refs[s.i])
		s.i++
		return true, nil
	}
	if s.left == 0 {
		return false, nil
	}
	s.left--
	n, err := binary.ReadUvarint(s.r)
	if err == nil && (n == 0 || n > maxStringIDBytes) {
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

// stringTable is the merged string id map: dense id v's string is
// strbytes[offs[v]:offs[v+1]], strbytes in a temporary file.
type stringTable struct {
	offs  []uint64
	path  string // the strings, back to back
	bytes uint64
}

// mergeStrings merges the runs' string sets into the graph's string table,
// written to a temporary file in dir, and gives each run the map from its
// local ids to dense ids (runFile.remap). The in-memory run's records are
// rewritten in dense ids, and every run's marks name dense sources.
func mergeStrings(ctx context.Context, runs []runFile, dir string) (*stringTable, error) {
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
		s := &strReader{run: i, set: rf.strs}
		if rf.strPath != "" {
			f, err := os.Open(rf.strPath)
			if err != nil {
				return nil, fmt.Errorf("read back string run: %w", err)
			}
			s.f, s.r, s.name, s.left = f, bufio.NewReaderSize(f, 64<<10), rf.strPath, int(rf.nstrs)
		}
		rf.remap = make([]uint32, 0, rf.nstrs)
		srcs = append(srcs, s)
	}
	out, err := os.CreateTemp(dir, "walkstage-strings-*")
	if err != nil {
		return nil, fmt.Errorf("spill strings: %w", err)
	}
	t := &stringTable{path: out.Name(), offs: []uint64{0}}
	ok := false
	defer func() {
		if !ok {
			out.Close()
			os.Remove(t.path)
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
		if len(t.offs) == 1 || !bytes.Equal(top.cur, last) {
			if len(t.offs) > 1 {
				v++
			}
			if _, err := w.Write(top.cur); err != nil {
				return nil, fmt.Errorf("spill strings: %w", err)
			}
			t.bytes += uint64(len(top.cur))
			t.offs = append(t.offs, t.bytes)
			last = append(last[:0], top.cur...)
		}
		runs[top.run].remap = append(runs[top.run].remap, v)
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
		if int64(len(rf.remap)) != rf.nstrs {
			os.Remove(t.path)
			return nil, fmt.Errorf("string run %d: %d strings, %d mapped (internal error)", i, rf.nstrs, len(rf.remap))
		}
		for j := range rf.marks {
			rf.marks[j].s = int64(rf.remap[rf.marks[j].s])
		}
		if rf.mem != nil {
			for j := range rf.mem {
				r := &rf.mem[j]
				r.s, r.d = int64(rf.remap[r.s]), int64(rf.remap[r.d])
			}
			rf.remap = nil
		}
	}
	return t, nil
}
