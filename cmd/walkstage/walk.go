package main

import (
	"context"
	"errors"
	"io"
)

// walkCmd is being written; this placeholder keeps the tree building.
func walkCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return errors.New("not available in this build yet")
}
