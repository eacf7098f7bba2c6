package catalog

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"strings"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/redact"
	"github.com/walkstage/walkstage/store"
)

// LoadGraph loads the graph a location names: a local path, an object URL
// (s3://bucket/key?region=..., gs://bucket/key, file:///path) or a catalog
// pointer (IsPointerURL: the version its CURRENT names). Remote graphs
// are downloaded into dir (the system temporary directory when empty) and
// memory-mapped; the file is unlinked once mapped.
func LoadGraph(ctx context.Context, location, dir string) (*graph.Graph, error) {
	if g, ok, err := loadCurrent(ctx, location, dir); ok {
		return g, err
	}
	u, err := url.Parse(location)
	if err != nil || u.Scheme == "" || len(u.Scheme) == 1 { // "C:\..." is a path
		return graph.Load(location)
	}
	if u.Scheme == "file" {
		return graph.Load(u.Path)
	}
	location = redact.String(location) // for the messages below; u is what is opened
	key := strings.TrimPrefix(u.Path, "/")
	if key == "" {
		return nil, fmt.Errorf("graph URL %q names a bucket, not an object", location)
	}
	bu := *u
	bu.Path = ""
	b, err := store.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", location, err)
	}
	defer b.Close()
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", location, err)
	}
	defer r.Close()
	f, err := os.CreateTemp(dir, "walkstage-graph-*-"+path.Base(key))
	if err != nil {
		return nil, fmt.Errorf("graph %s: download: %w", location, err)
	}
	defer os.Remove(f.Name()) // the mapping keeps the data alive on Unix
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return nil, fmt.Errorf("graph %s: download to %s: %w", location, f.Name(), err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("graph %s: download to %s: %w", location, f.Name(), err)
	}
	g, err := graph.Load(f.Name())
	if err != nil {
		return nil, fmt.Errorf("graph %s: %w", location, err)
	}
	return g, nil
}

// loadCurrent loads the version a catalog pointer names (ok false:
// location is not a pointer). A stage that crashed during a swap restarts
// here, on the pointer's version.
func loadCurrent(ctx context.Context, location, dir string) (g *graph.Graph, ok bool, err error) {
	if !IsPointerURL(location) {
		return nil, false, nil
	}
	c, err := Open(ctx, location)
	if err != nil {
		return nil, true, err
	}
	defer c.Close()
	p, err := c.Current(ctx)
	if err != nil {
		return nil, true, err
	}
	g, err = c.Load(ctx, p, dir)
	return g, true, err
}
