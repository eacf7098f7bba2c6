package graph

// The binary graph file (".wsg") is laid out so that Load can map it
// read-only and point the Graph's slices straight into the mapping: a fixed
// 256-byte header, then sections at 64-byte aligned offsets, each holding one
// array in its little-endian in-memory form. docs/reference/graph-format.md is the
// specification; keep the two in step.

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"unicode/utf8"
	"unsafe"
)

// Magic opens every graph file.
const Magic = "WSGRAPH\x00"

// FormatVersion is the newest file layout this build reads and writes.
// Save writes version 1 for a graph that has neither edge times nor string
// ids, so such a file (and its Version) is the same as before version 2
// existed and older readers still load it; version 2 only when it needs a
// section version 1 lacks. Load accepts both.
const FormatVersion = 2

// formatVersion1 is the first layout: seven sections, no times, no string ids.
const formatVersion1 = 1

const (
	headerSize   = 256
	sectionAlign = 64
	// maxNameBytes bounds the graph name so a corrupt header cannot ask for
	// an absurd allocation.
	maxNameBytes = 4096
)

// Header flag bits.
const (
	flagWeighted uint32 = 1 << iota
	flagLabelled
	flagIDs
	flagTimed     // version 2: times and bytime sections
	flagStringIDs // version 2: stroffs and strbytes sections (byext orders the strings)
	flagsKnownV1  = flagWeighted | flagLabelled | flagIDs
	flagsKnown    = flagsKnownV1 | flagTimed | flagStringIDs
)

// Section indexes in the header's section table, in file order.
const (
	secName = iota
	secOffsets
	secTargets
	secWeights
	secLabels
	secIDs
	secByExt
	secTimes
	secByTime
	secStrOffsets
	secStrBytes
	numSections
	numSectionsV1 = secByExt + 1 // the table of a version 1 file ends after byext
)

var sectionNames = [numSections]string{"name", "offsets", "targets", "weights", "labels", "ids", "byext", "times", "bytime", "stroffs", "strbytes"}

// maxStringID bounds one string id, so a corrupt or hostile file cannot make
// a reader copy megabytes per vertex into a walk.
const maxStringID = 1024

// Header field offsets (bytes from the start of the file).
const (
	hMagic      = 0
	hVersion    = 8
	hFlags      = 12
	hVertices   = 16
	hEdges      = 24
	hNumLabels  = 32
	hReserved   = 36
	hChecksum   = 40
	hFileSize   = 48
	hSections   = 64                           // sections(version) x (offset uint64, length uint64)
	hHeaderCRC  = hSections + 16*numSectionsV1 // version 1: CRC-64 of bytes [0, hHeaderCRC)
	hHeaderCRC2 = hSections + 16*numSections   // version 2: CRC-64 of bytes [0, hHeaderCRC2)
)

// tableLen is how many section table entries a file of version v has.
func tableLen(v uint32) int {
	if v == formatVersion1 {
		return numSectionsV1
	}
	return numSections
}

// crcAt is where the header CRC of a version v file lies.
func crcAt(v uint32) int { return hSections + 16*tableLen(v) }

// versionFor is the oldest layout that can hold a file with these flags.
func versionFor(flags uint32) uint32 {
	if flags&^flagsKnownV1 != 0 {
		return FormatVersion
	}
	return formatVersion1
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// header is the decoded fixed part of a graph file.
type header struct {
	version   uint32
	flags     uint32
	vertices  uint64
	edges     uint64
	numLabels uint32
	checksum  uint64
	fileSize  uint64
	sections  [numSections]struct{ off, len uint64 }
}

func (h *header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b[hMagic:], Magic)
	le := binary.LittleEndian
	le.PutUint32(b[hVersion:], h.version)
	le.PutUint32(b[hFlags:], h.flags)
	le.PutUint64(b[hVertices:], h.vertices)
	le.PutUint64(b[hEdges:], h.edges)
	le.PutUint32(b[hNumLabels:], h.numLabels)
	le.PutUint64(b[hChecksum:], h.checksum)
	le.PutUint64(b[hFileSize:], h.fileSize)
	for i, s := range h.sections[:tableLen(h.version)] {
		le.PutUint64(b[hSections+16*i:], s.off)
		le.PutUint64(b[hSections+16*i+8:], s.len)
	}
	at := crcAt(h.version)
	le.PutUint64(b[at:], crc64.Checksum(b[:at], crcTable))
	return b
}

// layout fills the section table for a graph of the given shape and returns
// the file size. Sections follow the header in table order, each starting on
// a 64-byte boundary; absent sections have offset and length 0. strLen is
// the total length of the string ids (0 without them).
func (h *header) layout(nameLen int, strLen uint64) uint64 {
	v, e := h.vertices, h.edges
	lens := [numSections]uint64{secName: uint64(nameLen), secOffsets: (v + 1) * 8, secTargets: e * 4}
	if h.flags&flagWeighted != 0 {
		lens[secWeights] = e * 4
	}
	if h.flags&flagLabelled != 0 {
		lens[secLabels] = e
	}
	if h.flags&flagIDs != 0 {
		lens[secIDs] = v * 8
		lens[secByExt] = v * 4
	}
	if h.flags&flagTimed != 0 {
		lens[secTimes] = e * 8
		lens[secByTime] = e * 4
	}
	if h.flags&flagStringIDs != 0 {
		lens[secByExt] = v * 4
		lens[secStrOffsets] = (v + 1) * 8
		lens[secStrBytes] = strLen
	}
	pos := uint64(headerSize)
	for i, n := range lens {
		if n == 0 {
			h.sections[i].off, h.sections[i].len = 0, 0
			continue
		}
		pos = alignUp(pos)
		h.sections[i].off, h.sections[i].len = pos, n
		pos += n
	}
	h.fileSize = pos
	return pos
}

func alignUp(x uint64) uint64 { return (x + sectionAlign - 1) &^ (sectionAlign - 1) }

// decodeHeader parses and checks the header against the file size. Every
// section must lie inside the file, be aligned, not overlap the header or
// another section, and have exactly the length the counts imply, so that
// the slices built from them can never index outside the mapping.
func decodeHeader(b []byte, fileSize uint64) (*header, error) {
	if uint64(len(b)) < headerSize || fileSize < headerSize {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the %d-byte header", ErrFormat, fileSize, headerSize)
	}
	if string(b[hMagic:hMagic+8]) != Magic {
		return nil, fmt.Errorf("%w: bad magic %q at offset 0 (not a walkstage graph file)", ErrFormat, b[hMagic:hMagic+8])
	}
	le := binary.LittleEndian
	h := &header{
		version:   le.Uint32(b[hVersion:]),
		flags:     le.Uint32(b[hFlags:]),
		vertices:  le.Uint64(b[hVertices:]),
		edges:     le.Uint64(b[hEdges:]),
		numLabels: le.Uint32(b[hNumLabels:]),
		checksum:  le.Uint64(b[hChecksum:]),
		fileSize:  le.Uint64(b[hFileSize:]),
	}
	if h.version != formatVersion1 && h.version != FormatVersion {
		return nil, fmt.Errorf("%w: format version %d at offset %d, this build reads versions %d and %d", ErrFormat, h.version, hVersion, formatVersion1, FormatVersion)
	}
	at := crcAt(h.version)
	if got, want := le.Uint64(b[at:]), crc64.Checksum(b[:at], crcTable); got != want {
		return nil, fmt.Errorf("%w: header checksum %016x at offset %d does not match the header (%016x): the header is corrupt", ErrFormat, got, at, want)
	}
	known := flagsKnown
	if h.version == formatVersion1 {
		known = flagsKnownV1
	}
	if h.flags&^known != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x at offset %d for format version %d", ErrFormat, h.flags&^known, hFlags, h.version)
	}
	if h.flags&flagIDs != 0 && h.flags&flagStringIDs != 0 {
		return nil, fmt.Errorf("%w: flags %#x at offset %d ask for both integer and string ids", ErrFormat, h.flags, hFlags)
	}
	if h.fileSize != fileSize {
		return nil, fmt.Errorf("%w: header says the file is %d bytes, it is %d (truncated or appended to)", ErrFormat, h.fileSize, fileSize)
	}
	if h.vertices > MaxVertices {
		return nil, fmt.Errorf("%w: %d vertices at offset %d exceeds the limit %d", ErrFormat, h.vertices, hVertices, uint64(MaxVertices))
	}
	// Edge count bound: targets alone take 4 bytes an edge, so a count the
	// file cannot hold is caught before any multiplication can overflow.
	if h.edges > fileSize/4 {
		return nil, fmt.Errorf("%w: %d edges at offset %d cannot fit in a %d-byte file", ErrFormat, h.edges, hEdges, fileSize)
	}
	if h.flags&flagLabelled == 0 && h.numLabels != 0 || h.numLabels > 256 {
		return nil, fmt.Errorf("%w: label count %d at offset %d is inconsistent with the flags", ErrFormat, h.numLabels, hNumLabels)
	}
	for i := range tableLen(h.version) {
		h.sections[i].off = le.Uint64(b[hSections+16*i:])
		h.sections[i].len = le.Uint64(b[hSections+16*i+8:])
	}
	want := *h
	want.layout(0, h.sections[secStrBytes].len)
	prevEnd := uint64(headerSize)
	for i, s := range h.sections {
		at := hSections + 16*i
		wantLen := want.sections[i].len
		if i == secName {
			wantLen = s.len
			if s.len > maxNameBytes {
				return nil, fmt.Errorf("%w: name section at offset %d is %d bytes, limit %d", ErrFormat, at, s.len, maxNameBytes)
			}
		}
		if i == secStrBytes && s.len > h.vertices*maxStringID {
			return nil, fmt.Errorf("%w: strbytes section at offset %d is %d bytes, more than %d vertices of at most %d bytes", ErrFormat, at, s.len, h.vertices, maxStringID)
		}
		if s.len != wantLen {
			return nil, fmt.Errorf("%w: %s section (table entry at offset %d) is %d bytes, want %d for V=%d E=%d", ErrFormat, sectionNames[i], at, s.len, wantLen, h.vertices, h.edges)
		}
		if s.len == 0 {
			continue
		}
		if s.off%sectionAlign != 0 || s.off < prevEnd || s.off > fileSize || s.len > fileSize-s.off {
			return nil, fmt.Errorf("%w: %s section [%d, +%d) (table entry at offset %d) is misaligned, overlaps another section or lies beyond the %d-byte file", ErrFormat, sectionNames[i], s.off, s.len, at, fileSize)
		}
		prevEnd = s.off + s.len
	}
	return h, nil
}

// Save writes g to path atomically: it writes a temporary file in the same
// directory, syncs it and renames it over path, so readers never see a
// partial file. The external-id index is written too, so Load needs no
// sort.
func Save(path string, g *Graph) (err error) {
	if err := g.Validate(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if len(g.Name) > maxNameBytes {
		return fmt.Errorf("save %s: graph name is %d bytes, limit %d", path, len(g.Name), maxNameBytes)
	}
	if !littleEndian() {
		return fmt.Errorf("save %s: %w", path, errBigEndian)
	}
	byExt := g.byExt
	if g.IDs != nil && len(byExt) != len(g.IDs) {
		var err error
		if byExt, err = externalIndex(g.IDs); err != nil {
			return fmt.Errorf("save %s: %w", path, err)
		}
	}
	if g.StrOffsets != nil && len(byExt) != g.NumVertices() {
		var err error
		if byExt, err = stringIndex(g.StrOffsets, g.StrBytes); err != nil {
			return fmt.Errorf("save %s: %w", path, err)
		}
	}
	h := &header{vertices: uint64(g.NumVertices()), edges: uint64(g.NumEdges())}
	if g.Weights != nil {
		h.flags |= flagWeighted
	}
	if g.Labels != nil {
		h.flags |= flagLabelled
		// NumLabels may promise labels no edge uses yet (a schema), but
		// never fewer than the edges use.
		n := max(numLabelsOf(g.Labels), g.NumLabels)
		if n > 256 {
			return fmt.Errorf("save %s: NumLabels %d exceeds 256", path, g.NumLabels)
		}
		h.numLabels = uint32(n)
	}
	if g.IDs != nil {
		h.flags |= flagIDs
	}
	if g.Times != nil {
		h.flags |= flagTimed
	}
	if g.StrOffsets != nil {
		h.flags |= flagStringIDs
	}
	h.version = versionFor(h.flags)
	h.checksum = graphChecksum(g)
	h.layout(len(g.Name), uint64(len(g.StrBytes)))
	payload := [numSections][]byte{
		secName: []byte(g.Name), secOffsets: bytesOf(g.Offsets), secTargets: bytesOf(g.Targets),
		secWeights: bytesOf(g.Weights), secLabels: bytesOf(g.Labels), secIDs: bytesOf(g.IDs), secByExt: bytesOf(byExt),
		secTimes: bytesOf(g.Times), secByTime: bytesOf(g.ByTime), secStrOffsets: bytesOf(g.StrOffsets), secStrBytes: g.StrBytes,
	}
	return writeAtomic(path, func(f *os.File) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if _, err := w.Write(h.encode()); err != nil {
			return err
		}
		pos := uint64(headerSize)
		for i, s := range h.sections {
			if s.len == 0 {
				continue
			}
			if err := writeZeros(w, s.off-pos); err != nil {
				return err
			}
			if _, err := w.Write(payload[i]); err != nil {
				return err
			}
			pos = s.off + s.len
		}
		return w.Flush()
	})
}

func littleEndian() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}

// externalIndex returns the dense ids ordered by external id, failing on a
// repeated external id.
func externalIndex(ids []int64) ([]uint32, error) {
	idx := make([]uint32, len(ids))
	for i := range idx {
		idx[i] = uint32(i)
	}
	slices.SortFunc(idx, func(a, b uint32) int { return cmp.Compare(ids[a], ids[b]) })
	for i := 1; i < len(idx); i++ {
		if ids[idx[i]] == ids[idx[i-1]] {
			return nil, fmt.Errorf("%w: external id %d used by dense ids %d and %d", ErrInvalid, ids[idx[i]], idx[i-1], idx[i])
		}
	}
	return idx, nil
}

func numLabelsOf(labels []uint8) int {
	m := -1
	for _, l := range labels {
		m = max(m, int(l))
	}
	return m + 1
}

func writeZeros(w io.Writer, n uint64) error {
	var z [sectionAlign]byte
	for n > 0 {
		k := min(n, uint64(len(z)))
		if _, err := w.Write(z[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// writeAtomic runs write on a temporary file next to path and renames it
// into place after a sync; on any failure the temporary file is removed.
func writeAtomic(path string, write func(*os.File) error) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// LoadOptions tune Load. The zero value maps the file and checks its
// structure (linear in V+E, no checksum).
type LoadOptions struct {
	// VerifyChecksum recomputes the CRC-64 of the content and compares it to
	// the header: it reads every byte, so it costs about a second per few GB.
	VerifyChecksum bool
	// SkipValidate trusts the content: only the header and section bounds
	// are checked, so loading is O(1) apart from page faults. Use it for
	// files this process or a verified pipeline wrote; a corrupt trusted
	// file can make walks panic on an out-of-range target.
	SkipValidate bool
	// Populate asks the kernel to read the whole file in up front
	// (MAP_POPULATE) instead of faulting pages in during the first walks.
	Populate bool
}

// Load maps a graph file written by Save (or an importer) read-only and
// checks its structure. The graph's slices point into the mapping: call
// Close to release it.
func Load(path string) (*Graph, error) { return LoadWith(path, LoadOptions{}) }

// LoadWith is Load with options.
func LoadWith(path string, o LoadOptions) (*Graph, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	size := st.Size()
	if size < headerSize {
		return nil, fmt.Errorf("load %s: %w: %d bytes is shorter than the %d-byte header", path, ErrFormat, size, headerSize)
	}
	if uint64(size) > uint64(^uint(0)>>1) {
		return nil, fmt.Errorf("load %s: %d bytes does not fit in the address space", path, size)
	}
	data, unmap, err := mapFile(f, int(size), o.Populate)
	if err != nil {
		// Some filesystems (FUSE mounts, some network filesystems) cannot
		// map files; reading costs memory and time but still works.
		var rerr error
		if data, unmap, rerr = readAligned(f, int(size)); rerr != nil {
			return nil, fmt.Errorf("load %s: %w (and reading it: %v)", path, err, rerr)
		}
	}
	g, err := decode(data, o)
	if err != nil {
		unmap()
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	g.closer = unmap
	g.file = path
	return g, nil
}

// Decode reads a graph from an in-memory image of a graph file. The graph
// aliases data (copied first if data is not 8-byte aligned), so data must
// not change while the graph is in use.
func Decode(data []byte, o LoadOptions) (*Graph, error) {
	if len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))%8 != 0 {
		buf := make([]uint64, (len(data)+7)/8)
		aligned := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)[:len(data)]
		copy(aligned, data)
		data = aligned
	}
	return decode(data, o)
}

func decode(data []byte, o LoadOptions) (*Graph, error) {
	if !littleEndian() {
		return nil, errBigEndian
	}
	h, err := decodeHeader(data, uint64(len(data)))
	if err != nil {
		return nil, err
	}
	sec := func(i int) []byte {
		s := h.sections[i]
		if s.len == 0 {
			return nil
		}
		return data[s.off : s.off+s.len]
	}
	name := sec(secName)
	if !utf8.Valid(name) {
		return nil, fmt.Errorf("%w: graph name at offset %d is not UTF-8", ErrFormat, h.sections[secName].off)
	}
	g := &Graph{
		Name:       string(name),
		Version:    fmt.Sprintf("%016x", h.checksum),
		Offsets:    sliceOf[uint64](sec(secOffsets)),
		Targets:    sliceOf[uint32](sec(secTargets)),
		Weights:    sliceOf[float32](sec(secWeights)),
		Labels:     sliceOf[uint8](sec(secLabels)),
		NumLabels:  int(h.numLabels),
		IDs:        sliceOf[int64](sec(secIDs)),
		byExt:      sliceOf[uint32](sec(secByExt)),
		Times:      sliceOf[int64](sec(secTimes)),
		ByTime:     sliceOf[uint32](sec(secByTime)),
		StrOffsets: sliceOf[uint64](sec(secStrOffsets)),
		StrBytes:   sec(secStrBytes),
	}
	// A graph with no edges still has flags saying which arrays exist;
	// keep them non-nil so Weighted/Labelled answer as the writer meant.
	if h.flags&flagWeighted != 0 && g.Weights == nil {
		g.Weights = []float32{}
	}
	if h.flags&flagLabelled != 0 && g.Labels == nil {
		g.Labels = []uint8{}
	}
	if h.flags&flagIDs != 0 && g.IDs == nil {
		g.IDs, g.byExt = []int64{}, []uint32{}
	}
	if h.flags&flagTimed != 0 && g.Times == nil {
		g.Times, g.ByTime = []int64{}, []uint32{}
	}
	if h.flags&flagStringIDs != 0 {
		if g.byExt == nil {
			g.byExt = []uint32{}
		}
		if g.StrBytes == nil {
			g.StrBytes = []byte{}
		}
	}
	// Offsets and lengths of the string sections are checked here, not only
	// by Validate: the strings are read through them even with SkipValidate.
	if g.StrOffsets != nil && g.StrOffsets[len(g.StrOffsets)-1] != uint64(len(g.StrBytes)) {
		return nil, fmt.Errorf("%w: the last string offset is %d, the strbytes section (offset %d) is %d bytes", ErrFormat, g.StrOffsets[len(g.StrOffsets)-1], h.sections[secStrBytes].off, len(g.StrBytes))
	}
	if !o.SkipValidate {
		if err := validateLoaded(g, h); err != nil {
			return nil, err
		}
	}
	if o.VerifyChecksum {
		if sum := graphChecksum(g); sum != h.checksum {
			return nil, fmt.Errorf("%w: content checksum %016x does not match the header's %016x (offset %d): the file is corrupt", ErrFormat, sum, h.checksum, hChecksum)
		}
	}
	return g, nil
}

// validateLoaded checks what Validate checks plus the parts only a file can
// get wrong: labels below NumLabels and the external-id index being the
// sorting permutation of IDs.
func validateLoaded(g *Graph, h *header) error {
	if err := g.validateParallel(); err != nil {
		return fmt.Errorf("%w (sections at offsets %d..)", err, h.sections[secOffsets].off)
	}
	if g.Labels != nil {
		var seen [256]bool
		for _, l := range g.Labels {
			seen[l] = true
		}
		for l := g.NumLabels; l < 256; l++ {
			if seen[l] {
				return fmt.Errorf("%w: label %d in the labels section at offset %d, header says %d labels", ErrFormat, l, h.sections[secLabels].off, g.NumLabels)
			}
		}
	}
	if g.StrOffsets != nil {
		n := uint32(g.NumVertices())
		for i, d := range g.byExt {
			if d >= n {
				return fmt.Errorf("%w: string-id index entry %d at offset %d is %d, beyond %d vertices", ErrFormat, i, h.sections[secByExt].off+uint64(i)*4, d, n)
			}
			if i > 0 && g.compareStrings(g.byExt[i-1], d) >= 0 {
				return fmt.Errorf("%w: string-id index not strictly increasing at entry %d (offset %d)", ErrFormat, i, h.sections[secByExt].off+uint64(i)*4)
			}
		}
	}
	if g.IDs != nil {
		n := uint32(len(g.IDs))
		for i, d := range g.byExt {
			if d >= n {
				return fmt.Errorf("%w: external-id index entry %d at offset %d is %d, beyond %d vertices", ErrFormat, i, h.sections[secByExt].off+uint64(i)*4, d, n)
			}
			// Strictly increasing external ids over V in-range entries
			// proves the index is a permutation.
			if i > 0 && g.IDs[g.byExt[i-1]] >= g.IDs[d] {
				return fmt.Errorf("%w: external-id index not strictly increasing at entry %d (offset %d)", ErrFormat, i, h.sections[secByExt].off+uint64(i)*4)
			}
		}
	}
	return nil
}

// sliceOf views b as a slice of T. b's start must be aligned for T; the
// format's 64-byte section alignment over a page-aligned mapping (or an
// 8-byte aligned buffer) guarantees it.
func sliceOf[T any](b []byte) []T {
	if len(b) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), len(b)/int(unsafe.Sizeof(z)))
}

func crcOf(b []byte) uint64 { return crc64.Checksum(b, crcTable) }

// stringIndex returns the dense ids ordered by string id, failing on a
// repeated id.
func stringIndex(offs []uint64, b []byte) ([]uint32, error) {
	n := len(offs) - 1
	id := func(v uint32) []byte { return b[offs[v]:offs[v+1]] }
	idx := make([]uint32, n)
	for i := range idx {
		idx[i] = uint32(i)
	}
	slices.SortFunc(idx, func(x, y uint32) int { return bytes.Compare(id(x), id(y)) })
	for i := 1; i < n; i++ {
		if bytes.Equal(id(idx[i]), id(idx[i-1])) {
			return nil, fmt.Errorf("%w: string id %q used by dense ids %d and %d", ErrInvalid, id(idx[i]), idx[i-1], idx[i])
		}
	}
	return idx, nil
}
