package gpu

import (
	"errors"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

// TestTemporalSupported: the GPU engine refuses, as an invalid algorithm
// for it, temporal walks on a graph not wholly on the device, and accepts
// the rest, temporal Node2Vec included.
func TestTemporalSupported(t *testing.T) {
	tp := walk.TimeParams{Bias: walk.TimeExponential, Scale: 10}
	cases := []struct {
		name  string
		alg   walk.Algorithm
		whole bool
		want  error
	}{
		{"temporal", walk.Algorithm{Kind: walk.Temporal, Length: 5, Time: tp}, true, nil},
		{"temporal-weighted", walk.Algorithm{Kind: walk.Temporal, Length: 5, Time: tp, Weighted: true}, true, nil},
		{"temporal-node2vec", walk.Algorithm{Kind: walk.Temporal, Length: 5, Time: tp, P: 2, Q: 0.5}, true, nil},
		{"temporal-placed", walk.Algorithm{Kind: walk.Temporal, Length: 5, Time: tp}, false, errTemporalPlaced},
		{"deepwalk-placed", walk.Algorithm{Kind: walk.DeepWalk, Length: 5}, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := temporalSupported(c.alg, c.whole)
			if c.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, c.want) || !errors.Is(err, walk.ErrInvalidAlgorithm) {
				t.Fatalf("got %v, want %v wrapping walk.ErrInvalidAlgorithm", err, c.want)
			}
		})
	}
}
