//go:build !unix

package graph

import "os"

// mapFile reads the file into memory where mmap is not available.
func mapFile(f *os.File, size int, _ bool) ([]byte, func() error, error) {
	return readAligned(f, size)
}
