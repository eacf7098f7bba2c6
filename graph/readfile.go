package graph

import (
	"fmt"
	"io"
	"os"
	"unsafe"
)

// readAligned reads size bytes of f into 8-byte aligned memory: the
// fallback when a file cannot be mapped (no mmap on the platform, or a
// filesystem that refuses it).
func readAligned(f *os.File, size int) ([]byte, func() error, error) {
	if size <= 0 {
		return nil, func() error { return nil }, nil
	}
	buf := make([]uint64, (size+7)/8)
	data := unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*8)[:size]
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, int64(size)), data); err != nil {
		return nil, nil, fmt.Errorf("read %d bytes: %w", size, err)
	}
	return data, func() error { return nil }, nil
}
