package ooc

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"unsafe"

	"github.com/walkstage/walkstage/internal/directio"
)

// tableFile holds the alias tables of the partitions already built, on
// disk: a weighted walk loads a partition some tens of times (about once
// per step of its walks, since a random walk leaves a partition after a
// step or two), and building its tables on every load cost ten times the
// read (walk.AliasVertex is sequential per vertex, about 60 ns an edge
// here), where reading them back costs 8 bytes an edge more than the
// weights. Built once, on a partition's first load, they are read like
// the graph, in large direct reads. The file is unlinked as soon as it is
// open, so nothing is left behind when the process ends.
//
// Layout: prob (float32) by edge at [0, 4E), the alias target (uint32) by
// edge at [altOff, altOff+4E).
type tableFile struct {
	w      *os.File
	r      *reader
	altOff int64
	mu     sync.Mutex
	built  []bool // by partition
}

// openTableFile creates the file in dir, or the system's temporary
// directory where dir is not writable.
func openTableFile(dir string, edges int64, partitions int, direct bool) (*tableFile, error) {
	f, err := os.CreateTemp(dir, ".walkstage-alias-*")
	if err != nil {
		var err2 error
		if f, err2 = os.CreateTemp("", "walkstage-alias-*"); err2 != nil {
			return nil, fmt.Errorf("out-of-core alias table file: in %s: %v; in the temporary directory: %w", dir, err, err2)
		}
	}
	r, err := openReader(f.Name(), direct)
	os.Remove(f.Name())
	if err != nil {
		f.Close()
		return nil, err
	}
	return &tableFile{w: f, r: r, altOff: (edges*4 + directio.Align - 1) &^ (directio.Align - 1), built: make([]bool, partitions)}, nil
}

func tableDir(graphPath string) string { return filepath.Dir(graphPath) }

func (t *tableFile) has(p int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.built[p]
}

// store writes partition p's tables (edges from edgeLo) and marks them built.
func (t *tableFile) store(p int, edgeLo uint64, prob []float32, alt []uint32) error {
	if len(prob) > 0 {
		if _, err := t.w.WriteAt(bytesOf(prob), int64(edgeLo)*4); err != nil {
			return fmt.Errorf("out-of-core alias table file: %w", err)
		}
		if _, err := t.w.WriteAt(bytesOf(alt), t.altOff+int64(edgeLo)*4); err != nil {
			return fmt.Errorf("out-of-core alias table file: %w", err)
		}
	}
	t.mu.Lock()
	t.built[p] = true
	t.mu.Unlock()
	return nil
}

func (t *tableFile) close() error {
	t.r.close()
	return t.w.Close()
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
