package graph

// The exports in this file are the seam for writers that build a graph file
// in place instead of calling Save: the streaming importer (graph/edgelist)
// writes each section at its offset as the merged edges arrive, then seals
// the file with a header. They exist so that the format's layout, header
// encoding and content checksum stay defined in one place, this package,
// while the importer keeps to its own.

import (
	"fmt"
	"hash/crc64"
	"io"
	"os"
)

// MaxNameBytes is the longest graph name a file holds. It is exported so an
// importer can refuse a long name before reading its input, with the same
// limit Save and Load apply.
const MaxNameBytes = maxNameBytes

// SectionID names one section of a graph file; docs/reference/graph-format.md
// lists them in file order.
type SectionID int

// The sections of a graph file, in file order.
const (
	SectionName    SectionID = secName
	SectionOffsets SectionID = secOffsets
	SectionTargets SectionID = secTargets
	SectionWeights SectionID = secWeights
	SectionLabels  SectionID = secLabels
	SectionIDs     SectionID = secIDs
	SectionByExt   SectionID = secByExt
	// Format version 2 sections: edge times in time order and the time
	// order's permutation; string ids (offsets and bytes).
	SectionTimes      SectionID = secTimes
	SectionByTime     SectionID = secByTime
	SectionStrOffsets SectionID = secStrOffsets
	SectionStrBytes   SectionID = secStrBytes
)

// FileShape is what a graph file's layout depends on: the counts, which
// optional arrays it holds and the length of its name.
type FileShape struct {
	Vertices, Edges              uint64
	NameBytes                    int
	Weighted, Labelled, External bool // External: the file holds an integer id map (ids and byext sections)
	Timed                        bool // edge times (times and bytime sections)
	// StringIDs: the file holds string ids (stroffs, strbytes and byext),
	// StringBytes long in all. Not with External.
	StringIDs   bool
	StringBytes uint64
}

// FileLayout is where every section of a graph file of a given shape lies,
// as Save lays it out. A writer fills the sections of a file of Size bytes
// at Section's offsets, then writes Header at offset 0.
type FileLayout struct {
	h         header
	nameBytes int
	strBytes  uint64
}

// NewFileLayout lays out a graph file of shape s. It fails on a big-endian
// host, where the file's in-memory arrays would not be little-endian.
func NewFileLayout(s FileShape) (*FileLayout, error) {
	if !littleEndian() {
		return nil, errBigEndian
	}
	if s.External && s.StringIDs {
		return nil, fmt.Errorf("graph file layout: both integer and string ids")
	}
	l := &FileLayout{h: header{vertices: s.Vertices, edges: s.Edges}, nameBytes: s.NameBytes, strBytes: s.StringBytes}
	if s.Weighted {
		l.h.flags |= flagWeighted
	}
	if s.Labelled {
		l.h.flags |= flagLabelled
	}
	if s.External {
		l.h.flags |= flagIDs
	}
	if s.Timed {
		l.h.flags |= flagTimed
	}
	if s.StringIDs {
		l.h.flags |= flagStringIDs
	}
	l.h.version = versionFor(l.h.flags)
	l.h.layout(s.NameBytes, s.StringBytes)
	return l, nil
}

// WithEdges returns the layout of the same file with e edges: a writer that
// laid the file out for an upper bound moves the later sections down to it
// once the final count is known.
func (l *FileLayout) WithEdges(e uint64) *FileLayout {
	out := *l
	out.h.edges = e
	out.h.layout(l.nameBytes, l.strBytes)
	return &out
}

// Section returns section id's offset and length in bytes (0, 0 when the
// file has no such section).
func (l *FileLayout) Section(id SectionID) (off, n uint64) {
	s := l.h.sections[id]
	return s.off, s.len
}

// Size is the file's length in bytes.
func (l *FileLayout) Size() uint64 { return l.h.fileSize }

// Header returns the file's 256-byte header for numLabels labels and the
// content checksum sum (see Checksum).
func (l *FileLayout) Header(numLabels uint32, sum uint64) []byte {
	h := l.h
	h.numLabels, h.checksum = numLabels, sum
	return h.encode()
}

// Checksum computes the content checksum (Graph.Checksum, the file's
// Version) from the sections already written to f: CRC-64 over offsets,
// targets, weights, labels, ids, times, bytime, stroffs and strbytes in that
// order (absent ones add nothing), in parallel over a
// read-only mapping where f can be mapped, else read through a buffer.
func (l *FileLayout) Checksum(f *os.File) (uint64, error) {
	h := &l.h
	if data, unmap, err := mapFile(f, int(h.fileSize), false); err == nil {
		defer unmap()
		var parts [][]byte
		for _, i := range checksummed {
			s := h.sections[i]
			parts = append(parts, data[s.off:s.off+s.len])
		}
		return checksumParallel(parts...), nil
	}
	var c uint64
	buf := make([]byte, 4<<20)
	for _, i := range checksummed {
		s := h.sections[i]
		r := io.NewSectionReader(f, int64(s.off), int64(s.len))
		for {
			n, err := r.Read(buf)
			c = crc64.Update(c, crcTable, buf[:n])
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, err
			}
		}
	}
	return c, nil
}

// checksummed lists the sections the content checksum covers, in order:
// the content; name, byext are left out (a label and a derived index).
var checksummed = []int{secOffsets, secTargets, secWeights, secLabels, secIDs, secTimes, secByTime, secStrOffsets, secStrBytes}

// WriteFileAtomic runs write on a temporary file next to path and renames it
// into place after a sync, as Save does; on any failure the temporary file
// is removed and path is untouched. It is exported for the importer and the
// exporter (graph/edgelist), whose files must appear whole or not at all.
// Errors are wrapped as "save PATH: ...".
func WriteFileAtomic(path string, write func(*os.File) error) error {
	return writeAtomic(path, write)
}
