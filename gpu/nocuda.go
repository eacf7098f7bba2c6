//go:build !cuda

package gpu

import (
	"fmt"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// Available reports why the GPU engine cannot be used: this binary was built
// without the cuda tag.
func Available() error {
	return fmt.Errorf("%w: built without the cuda tag (make build-cuda)", ErrUnavailable)
}

// New always fails in a build without the cuda tag.
func New(g *graph.Graph, opts ...Option) (walk.Engine, error) { return nil, Available() }

// DeviceCount always fails in a build without the cuda tag.
func DeviceCount() (int, error) { return 0, Available() }

// Probe always fails in a build without the cuda tag.
func Probe(ordinal int) error { return Available() }

// FreeMemory always fails in a build without the cuda tag.
func FreeMemory(ordinal int) (int64, error) { return 0, Available() }
