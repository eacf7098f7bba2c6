package main

import (
	"context"
	"errors"
	"io"
)

// runCmd is being written; this placeholder keeps the tree building.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not available in this build yet")
}
