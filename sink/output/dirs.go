package output

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/store"
)

// BatchDirs lists the directories {prefix}/kind=*/graph=*/algorithm=*/batch={id}
// and, of the layout before kinds, {prefix}/graph=*/algorithm=*/batch={id}
// that may exist: one listing of the prefix, one per kind and graph, then
// a probe per algorithm directory.
func BatchDirs(ctx context.Context, b *blob.Bucket, prefix, batchID string, timeout time.Duration) ([]string, error) {
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		prefix += "/"
	}
	top, err := listDirs(ctx, b, prefix, "", timeout)
	if err != nil {
		return nil, err
	}
	var graphs []string
	for _, d := range top {
		name := strings.TrimPrefix(d, prefix)
		switch {
		case strings.HasPrefix(name, kindDir):
			g, err := listDirs(ctx, b, d, "graph=", timeout)
			if err != nil {
				return nil, err
			}
			graphs = append(graphs, g...)
		case strings.HasPrefix(name, "graph="):
			graphs = append(graphs, d) // written before kinds had directories
		}
	}
	var dirs []string
	for _, g := range graphs {
		algos, err := listDirs(ctx, b, g, "algorithm=", timeout)
		if err != nil {
			return nil, err
		}
		for _, a := range algos {
			dirs = append(dirs, a+"batch="+escape(batchID))
		}
	}
	return dirs, nil
}

// listDirs returns the "directories" directly under prefix whose names
// start with name, each with its trailing slash.
func listDirs(ctx context.Context, b *blob.Bucket, prefix, name string, timeout time.Duration) ([]string, error) {
	if root, ok := store.LocalRoot(b); ok {
		if dir, ok := localDirOf(root, prefix); ok {
			return listLocalDirs(dir, prefix, name)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	it := b.List(&blob.ListOptions{Prefix: prefix + name, Delimiter: "/"})
	var out []string
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
		if obj.IsDir {
			out = append(out, obj.Key)
		}
	}
}

// localDirOf is the directory of a key prefix ("" or ending in "/") in a
// local bucket.
func localDirOf(root, prefix string) (string, bool) {
	if prefix == "" {
		return root, true
	}
	return store.LocalPath(root, strings.TrimSuffix(prefix, "/"))
}

// readDir is os.ReadDir; tests count the directories a search reads.
var readDir = os.ReadDir

// listLocalDirs is listDirs for a local bucket: one read of the directory
// itself. gocloud's fileblob answers a delimited listing by walking every
// file under the prefix's parent directory, which for "graph=" and
// "algorithm=" is every earlier batch (76.8 ms a lookup on tmpfs with
// 20,000 batches, sink's BenchmarkLookupBigTree). A directory with no object
// under it, which fileblob would not list, costs the caller one probe
// that finds nothing.
func listLocalDirs(dir, prefix, name string) ([]string, error) {
	entries, err := readDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), name) {
			out = append(out, prefix+e.Name()+"/")
		}
	}
	return out, nil
}
