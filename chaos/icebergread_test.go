package chaos

// A second reader of the walks table, independent of iceberg-go's table
// code: it follows the table format itself (the file catalog's version
// hint, the metadata JSON's current snapshot, the manifest list, the
// manifests' entries) and decodes the Avro files with the Avro library
// alone. The chaos suite compares what it finds with iceberg-go's view and
// with the committed batches, so a table that only iceberg-go reads as
// right does not pass.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/avro/ocf"

	"github.com/walkstage/walkstage/icetable"
	"github.com/walkstage/walkstage/sink"
)

// directView is the current snapshot's live data files (path -> records)
// and how many snapshots name each batch.
type directView struct {
	files map[string]int64
	count map[string]int
}

func (v directView) records() int64 {
	var n int64
	for _, r := range v.files {
		n += r
	}
	return n
}

// readTableDirect reads namespace.table of the file catalog at warehouse
// (a directory) by the table format alone.
func readTableDirect(warehouse, namespace, table string) (directView, error) {
	v := directView{files: map[string]int64{}, count: map[string]int{}}
	meta := filepath.Join(warehouse, namespace, table, "metadata")
	hint, err := os.ReadFile(filepath.Join(meta, "version-hint.text"))
	if err != nil {
		return v, fmt.Errorf("version hint: %w", err)
	}
	ver, err := strconv.Atoi(strings.TrimSpace(string(hint)))
	if err != nil {
		return v, fmt.Errorf("version hint %q: %w", hint, err)
	}
	raw, err := os.ReadFile(filepath.Join(meta, fmt.Sprintf("v%d.metadata.json", ver)))
	if err != nil {
		return v, err
	}
	var md struct {
		Current   *int64 `json:"current-snapshot-id"`
		Snapshots []struct {
			ID           int64             `json:"snapshot-id"`
			ManifestList string            `json:"manifest-list"`
			Summary      map[string]string `json:"summary"`
		} `json:"snapshots"`
	}
	if err := json.Unmarshal(raw, &md); err != nil {
		return v, fmt.Errorf("metadata v%d: %w", ver, err)
	}
	list := ""
	for _, s := range md.Snapshots {
		for _, e := range strings.Split(s.Summary[icetable.SummaryKey], ",") {
			if id, _, ok := strings.Cut(e, "="); ok {
				v.count[id]++
			}
		}
		if md.Current != nil && s.ID == *md.Current {
			list = s.ManifestList
		}
	}
	if md.Current == nil || *md.Current < 0 {
		return v, nil // no snapshot yet: an empty table
	}
	if list == "" {
		return v, fmt.Errorf("metadata v%d: current snapshot %d not among the snapshots", ver, *md.Current)
	}
	manifests, err := avroRecords(list)
	if err != nil {
		return v, fmt.Errorf("manifest list: %w", err)
	}
	for _, m := range manifests {
		path, _ := m["manifest_path"].(string)
		entries, err := avroRecords(path)
		if err != nil {
			return v, fmt.Errorf("manifest %s: %w", path, err)
		}
		for _, e := range entries {
			if status := toInt64(e["status"]); status == 2 { // DELETED
				continue
			}
			df, _ := e["data_file"].(map[string]any)
			file, _ := df["file_path"].(string)
			if _, dup := v.files[file]; dup {
				return v, fmt.Errorf("data file %s is live twice", file)
			}
			v.files[file] = toInt64(df["record_count"])
		}
	}
	return v, nil
}

// avroRecords decodes every record of the Avro container file at path (a
// local path or a file:// URL) as a map.
func avroRecords(path string) ([]map[string]any, error) {
	if u, err := url.Parse(path); err == nil && u.Scheme == "file" {
		path = u.Path
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := ocf.NewReader(f)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var out []map[string]any
	for {
		var rec map[string]any
		if err := r.Decode(&rec); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		out = append(out, rec)
	}
}

func toInt64(x any) int64 {
	switch n := x.(type) {
	case int32:
		return int64(n)
	case int64:
		return n
	case int:
		return int64(n)
	}
	return -1
}

// The direct reader agrees with iceberg-go on a table the stage's
// committer wrote: the same live files and records, each batch named once.
func TestReadTableDirectAgreesWithIcebergGo(t *testing.T) {
	ctx := context.Background()
	warehouse, data := t.TempDir(), t.TempDir()
	tb, err := icetable.Open(ctx, icetable.Options{Catalog: "file://" + warehouse})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	var want int64
	for i := range 5 {
		path := filepath.Join(data, fmt.Sprintf("p%d.parquet", i))
		rows := make([]sink.Row, 10+i)
		for j := range rows {
			rows[j] = sink.Row{WalkID: int64(j), Start: int64(j), Length: 1, Walk: []int64{int64(j), int64(j + 1)}}
		}
		if err := parquet.WriteFile(path, rows); err != nil {
			t.Fatal(err)
		}
		st, _ := os.Stat(path)
		b := icetable.Batch{Kind: "walks", ID: fmt.Sprintf("b%d", i), Fingerprint: "fp",
			Files: []icetable.File{{URL: "file://" + path, Rows: int64(len(rows)), Bytes: st.Size()}}}
		for range 2 { // the second append is a redelivery: nothing added
			if err := tb.Append(ctx, b); err != nil {
				t.Fatal(err)
			}
		}
		want += int64(len(rows))
	}
	v, err := readTableDirect(warehouse, "walkstage", "walks")
	if err != nil {
		t.Fatal(err)
	}
	g, err := readTable(ctx, "file://"+warehouse)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.files) != 5 || v.records() != want || g.records != want {
		t.Fatalf("direct: %d files, %d records; iceberg-go %d records; want 5 files, %d", len(v.files), v.records(), g.records, want)
	}
	for i := range 5 {
		id := fmt.Sprintf("b%d", i)
		if v.count[id] != 1 || g.count[id] != 1 {
			t.Fatalf("batch %s: %d snapshots (direct), %d (iceberg-go)", id, v.count[id], g.count[id])
		}
	}
}
