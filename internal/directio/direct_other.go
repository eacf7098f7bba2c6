//go:build !linux

package directio

import (
	"errors"
	"os"
)

// openDirect: O_DIRECT is Linux's; elsewhere the engine reads buffered.
func openDirect(string) (*os.File, error) { return nil, errors.New("no O_DIRECT on this system") }
