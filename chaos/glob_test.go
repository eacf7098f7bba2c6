package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"

	"github.com/parquet-go/parquet-go"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/sink/output"
)

// What a glob reads (issue 33): once every writer has stopped, the suite
// runs `walkstage output tidy` with age 0, as an operator would, and then
// a glob over each kind's directory must read exactly the committed parts
// and rows: those the complete manifests list, and `walkstage output ls`
// prints.

// outputKinds are the kinds a glob is checked over.
var outputKinds = []string{output.KindWalks, output.KindVisits, output.KindSamples}

// runTidy runs `walkstage output tidy` against the store at bucketURL with
// age 0 and returns its RESULT fields.
func runTidy(ctx context.Context, bucketURL string) (map[string]string, error) {
	out, err := exec.CommandContext(ctx, walkstageBin, "output", "tidy", bucketURL, "--prefix", "walks", "--older-than", "0s").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("walkstage output tidy: %v\n%s", err, out)
	}
	res := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				res[k] = v
			}
		}
	}
	if res["complete"] != "true" {
		return res, fmt.Errorf("walkstage output tidy printed no complete RESULT:\n%s", out)
	}
	return res, nil
}

// runLs returns the keys `walkstage output ls` prints for a kind.
func runLs(ctx context.Context, bucketURL, kind string) ([]string, error) {
	cmd := exec.CommandContext(ctx, walkstageBin, "output", "ls", bucketURL, "--prefix", "walks", "--kind", kind)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("walkstage output ls --kind %s: %v\n%s", kind, err, stderr.String())
	}
	var keys []string
	for _, u := range strings.Fields(string(out)) {
		k, err := objectKey(u)
		if err != nil {
			return nil, fmt.Errorf("walkstage output ls --kind %s printed %q: %v", kind, u, err)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys, nil
}

// globView is what the suite finds for one kind: the parts a glob over
// walks/kind=<kind>/**/*.parquet reads, and the parts (and rows) the
// complete manifests under walks/kind=<kind>/ list.
type globView struct {
	glob          []string
	committed     map[string]int64 // part -> rows, from the manifests
	committedRows int64
	globRows      int64 // from the glob's parts' Parquet footers
}

// readGlobView reads one kind's view from the store: objects is the
// bucket's listing (key -> size).
func readGlobView(ctx context.Context, b *blob.Bucket, objects map[string]int64, kind string) (globView, []string, error) {
	v := globView{committed: map[string]int64{}}
	var problems []string
	dir := "walks/kind=" + kind + "/"
	for _, k := range sortedKeys(objects) {
		if !strings.HasPrefix(k, dir) {
			continue
		}
		switch {
		case strings.HasSuffix(k, ".parquet"):
			v.glob = append(v.glob, k)
		case strings.HasSuffix(k, "/"+output.SuccessName):
			data, err := b.ReadAll(ctx, k)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", k, err))
				continue
			}
			var m manifest
			if err := json.Unmarshal(data, &m); err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", k, err))
				continue
			}
			complete := true
			for _, f := range m.Files {
				complete = complete && objects[f.Key] == f.Bytes
			}
			if !complete {
				problems = append(problems, k+": lists a part that is missing or of another size")
				continue
			}
			for _, f := range m.Files {
				v.committed[f.Key] = f.Rows
				v.committedRows += f.Rows
			}
		}
	}
	for _, k := range v.glob {
		n, err := parquetRows(ctx, b, k, objects[k])
		if err != nil {
			return v, problems, fmt.Errorf("%s: %w", k, err)
		}
		v.globRows += n
	}
	return v, problems, nil
}

// parquetRows reads the row count from a part's footer, fetching only the
// ranges the footer needs.
func parquetRows(ctx context.Context, b *blob.Bucket, key string, size int64) (int64, error) {
	f, err := parquet.OpenFile(rangeReader{ctx, b, key}, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return 0, err
	}
	return f.NumRows(), nil
}

// rangeReader reads an object with range requests.
type rangeReader struct {
	ctx context.Context
	b   *blob.Bucket
	key string
}

func (r rangeReader) ReadAt(p []byte, off int64) (int, error) {
	rr, err := r.b.NewRangeReader(r.ctx, r.key, off, int64(len(p)), nil)
	if err != nil {
		return 0, err
	}
	defer rr.Close()
	n, err := io.ReadFull(rr, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return n, err
}
