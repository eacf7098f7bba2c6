//go:build unix

package graph

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps size bytes of f read-only and shared: pages come from the
// page cache, so several processes loading one graph share its memory.
func mapFile(f *os.File, size int, populate bool) ([]byte, func() error, error) {
	flags := syscall.MAP_SHARED
	if populate {
		flags |= mapPopulate
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, flags)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	return data, func() error { return syscall.Munmap(data) }, nil
}
