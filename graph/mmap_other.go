//go:build !unix

package graph

import (
	"fmt"
	"io"
	"os"
	"unsafe"
)

// mapFile reads the file into 8-byte aligned memory where mmap is not
// available.
func mapFile(f *os.File, size int, _ bool) ([]byte, func() error, error) {
	buf := make([]uint64, (size+7)/8)
	data := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)[:size]
	if _, err := io.ReadFull(f, data); err != nil {
		return nil, nil, fmt.Errorf("read %d bytes: %w", size, err)
	}
	return data, func() error { return nil }, nil
}
