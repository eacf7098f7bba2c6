package directio

import (
	"os"
	"syscall"
)

// openDirect opens path for reads that bypass the page cache; filesystems
// without O_DIRECT (tmpfs) refuse the open, and the engine reads buffered.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_DIRECT, 0)
}
