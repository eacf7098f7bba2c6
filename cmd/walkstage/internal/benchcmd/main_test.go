package benchcmd

import (
	"context"
	"io"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
)

// walkstage runs the command line args as walkstage does, with only bench
// in its table, and returns the exit code.
func walkstage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Main(ctx, map[string]cli.Command{"bench": {Run: Run}}, args, stdout, stderr)
}
