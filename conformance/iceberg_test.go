package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// icebirdDeflate is the known failure of icebird 0.3.1 on the tables: it
// inflates Avro's deflate blocks with hyparquet-compressors' gunzip, which
// after a raw deflate stream's last block looks for a gzip footer and a
// next gzip member, and reads past the block into garbage; iceberg-go
// writes its manifests deflated and offers no other codec for them. When icebird reads the
// table, this test checks the rows instead, and the entry goes.
const icebirdDeflate = "offset is out of bounds"

// TestIcebirdReadsTheWalksTable: a walks table as the stage makes it
// (icetable, a file catalog, the parts of two batches written by the sink
// at its defaults, one of them in several parts) is read by icebird, a
// JavaScript Iceberg reader that is not iceberg-go: every row, and the sum
// of the walks' lengths the manifests give. Today it fails on the
// manifests' codec (icebirdDeflate), which the test asserts.
func TestIcebirdReadsTheWalksTable(t *testing.T) {
	node := nodeReaders(t)
	ctx := context.Background()
	g := testGraph(t)
	root := "file://" + t.TempDir()
	bucket, err := store.OpenBucket(ctx, root)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	in := newInputs(t, g)
	tb, err := icetable.Open(ctx, icetable.Options{Catalog: "file://" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	var rows, steps int64
	for i, opts := range [][]sink.Option{nil, {sink.WithRowGroupRows(256), sink.WithFileBytes(24 << 10)}} {
		m := in.write(t, bucket, fmt.Sprintf("t%d", i), output.KindWalks, false, opts)
		b := icetable.Batch{Kind: "walks", ID: m.BatchID + strconv.Itoa(i), Fingerprint: m.Fingerprint}
		for _, f := range m.Files {
			b.Files = append(b.Files, icetable.File{URL: store.ObjectURL(root, f.Key), Rows: f.Rows, Bytes: f.Bytes})
			rows += f.Rows
			steps += f.Steps
		}
		if err := tb.Append(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	tbl, err := tb.Table(ctx, "walks")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, "iceberg.mjs", "file://"+tbl.Location()).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			if strings.Contains(string(ee.Stderr), icebirdDeflate) {
				t.Logf("known failure: icebird cannot inflate iceberg-go's deflate manifests (%q)", icebirdDeflate)
				return
			}
			t.Fatalf("icebird: %v\n%s", err, ee.Stderr)
		}
		t.Fatal(err)
	}
	t.Errorf("icebird read the table: the known failure (icebirdDeflate) is gone; drop it and keep the row check below")
	var got struct {
		Rows      int64    `json:"rows"`
		SumLength string   `json:"sum_length"`
		WalkIDs   []string `json:"walk_ids"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("icebird's answer %q: %v", out, err)
	}
	if got.Rows != rows || got.SumLength != strconv.FormatInt(steps, 10) {
		t.Errorf("icebird read %d rows of %s steps; the manifests commit %d rows of %d steps", got.Rows, got.SumLength, rows, steps)
	}
	t.Logf("icebird: %d rows, %s steps, first walk ids %v", got.Rows, got.SumLength, got.WalkIDs)
}
