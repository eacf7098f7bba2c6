package outputcmd

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/walkcmd"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/walktest"
)

// The outputs these tests read are written by walkstage walk, as a user's
// would be; walkTestGraph is walkcmd's test graph.

// walkTestGraph is the tiny graph the walk command's tests walk.
func walkTestGraph(t *testing.T) string { return walktest.TinyGraph(t) }

func runWalk(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := walkcmd.Command("dev")(context.Background(), args, &out, &errb)
	return out.String() + errb.String(), err
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
