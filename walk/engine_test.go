package walk

import (
	"errors"
	"fmt"
	"runtime"
	"testing"

	"github.com/walkstage/walkstage/graph"
)

// TestFirstBeyond checks the start check against a plain loop: short and
// long lists (several shares on every core), bad starts at block and share
// edges, and several bad starts, of which the first must be named.
func TestFirstBeyond(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 1000
	long := 3*validateShare + 777
	cases := []struct {
		length int
		bad    []int
	}{
		{0, nil}, {1, nil}, {1, []int{0}}, {5, []int{4}}, {1023, []int{1022}}, {1024, []int{1023}},
		{1025, []int{1024}}, {3000, []int{2047, 2048}}, {long, nil}, {long, []int{long - 1}},
		{long, []int{validateShare - 1, 2 * validateShare}}, {long, []int{long / 4, long / 2}},
		{long, []int{3*validateShare + 1, 5}},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%d-%v", c.length, c.bad), func(t *testing.T) {
			starts := make([]uint32, c.length)
			for i := range starts {
				starts[i] = uint32(i*7919) % n
			}
			for k, i := range c.bad {
				starts[i] = n + uint32(k) // n itself is the first id beyond
			}
			want := -1
			for i, s := range starts {
				if s >= n {
					want = i
					break
				}
			}
			if got := firstBeyond(starts, n); got != want {
				t.Fatalf("firstBeyond = %d, want %d", got, want)
			}
		})
	}
}

// TestValidateJobsNamesTheStart checks the error of a start beyond the
// graph names the job, the start's index and the vertex.
func TestValidateJobsNamesTheStart(t *testing.T) {
	g, err := graph.FromEdges([]graph.Edge{{Src: 0, Dst: 1}, {Src: 1, Dst: 2}}, graph.BuildOptions{DenseIDs: true})
	if err != nil {
		t.Fatal(err)
	}
	starts := make([]uint32, 2*validateShare)
	starts[validateShare+3] = 3
	err = ValidateJobs(g, []Job{{Tag: 7, Algorithm: Algorithm{Kind: DeepWalk, Length: 5}, Starts: starts}})
	if !errors.Is(err, ErrInvalidAlgorithm) {
		t.Fatalf("err = %v, want ErrInvalidAlgorithm", err)
	}
	if want := fmt.Sprintf("job 7: %v: start %d is vertex 3, beyond 3 vertices", ErrInvalidAlgorithm, validateShare+3); err.Error() != want {
		t.Fatalf("err = %q, want %q", err, want)
	}
}
