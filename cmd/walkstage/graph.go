package main

import (
	"context"
	"errors"
	"io"
)

// graphCmd is being written; this placeholder keeps the tree building.
func graphCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not available in this build yet")
}
