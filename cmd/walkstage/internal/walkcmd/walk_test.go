package walkcmd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/graphcmd"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/walktest"
	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/fakes3"
	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// walkTestGraph is the tiny graph the walk command's tests walk.
func walkTestGraph(t *testing.T) string { return walktest.TinyGraph(t) }

func runWalk(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := walkCmd(context.Background(), "dev", args, &out, &errb)
	return out.String() + errb.String(), err
}

func TestWalkCommandWritesBatch(t *testing.T) {
	gp := walkTestGraph(t)
	seedFile := filepath.Join(t.TempDir(), "seeds.txt")
	os.WriteFile(seedFile, []byte("# two seeds\n10\n\n1990 # last vertex\n"), 0o644)
	for _, tc := range []struct {
		name  string
		args  []string
		walks int64
	}{
		{"node2vec all seeds", []string{"--algorithm", "node2vec", "--p", "2", "--q", "0.5", "--length", "30", "--walks-per-seed", "3"}, 600},
		{"weighted deepwalk range", []string{"--weighted", "--seeds", "100-190", "--length", "10"}, 10},
		{"ppr seed file", []string{"--algorithm", "ppr", "--stop-probability", "0.3", "--seeds", seedFile, "--walks-per-seed", "5"}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var digests []string
			for _, engine := range []string{"cpu", "auto"} {
				dir := t.TempDir()
				args := append([]string{"--graph", gp, "--out", "file://" + dir, "--batch-id", "b", "--engine", engine, "--compression", "snappy"}, tc.args...)
				out, err := runWalk(t, args...)
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				b, err := store.OpenBucket(context.Background(), "file://"+dir)
				if err != nil {
					t.Fatal(err)
				}
				algo := strings.TrimPrefix(tc.args[0], "--")
				if algo != "algorithm" {
					algo = "deepwalk"
				} else {
					algo = tc.args[1]
				}
				m, err := output.ReadManifest(context.Background(), b, "walks/kind=walks/graph=tiny/algorithm="+algo+"/batch=b/_SUCCESS")
				b.Close()
				if err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				if m.Walks != tc.walks || m.Engine != "cpu" || m.Compression != "snappy" {
					t.Fatalf("manifest %+v", m)
				}
				digests = append(digests, dirDigest(t, dir))
			}
			if digests[0] != digests[1] {
				t.Fatal("two runs with the same seed differ")
			}
		})
	}
}

func TestWalkCommandRejects(t *testing.T) {
	gp := walkTestGraph(t)
	out := "file://" + t.TempDir()
	seedFile := filepath.Join(t.TempDir(), "seeds.txt")
	os.WriteFile(seedFile, []byte("10\n11\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "5-5"}, "no vertex of graph tiny"},
		{[]string{"--seeds", seedFile}, "vertex 11 is not in graph tiny"},
		{[]string{"--seeds", "/no/such/file"}, "not \"all\""},
		{[]string{"--p", "2"}, "--p is for node2vec"},
		{[]string{"--algorithm", "metapath"}, "--schema"},
		{[]string{"--algorithm", "metapath", "--schema", "0"}, "labels"},
		{[]string{"--compression", "lz5"}, "unknown compression"},
		{[]string{"--engine", "tpu"}, "unknown engine"},
	} {
		_, err := runWalk(t, append([]string{"--graph", gp, "--out", out}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

// dirDigest hashes every file under dir, names and bytes. Parts carry
// their writer's attempt id ("part-00000-<attempt>.parquet"), different on
// every run by design; it is folded out of names and manifests, so what is
// compared is the bytes and the part order.
func dirDigest(t *testing.T, dir string) string {
	h := sha256.New()
	attempt := regexp.MustCompile(`(part-[0-9]+)-[0-9a-f]+\.parquet`)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		rel = attempt.ReplaceAllString(rel, "$1.parquet")
		data = attempt.ReplaceAll(data, []byte("$1.parquet"))
		fmt.Fprintf(h, "%s %x\n", rel, sha256.Sum256(data))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// The command writes to S3 through the same URL flags a user gives it.
func TestWalkCommandToS3(t *testing.T) {
	u := fakes3.Bucket(t, "out", nil)
	out, err := runWalk(t, "--graph", walkTestGraph(t), "--out", u, "--prefix", "p/q", "--algorithm", "node2vec", "--length", "12", "--batch-id", "s3")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "s3://out/p/q/kind=walks/graph=tiny/algorithm=node2vec/batch=s3/_SUCCESS") {
		t.Errorf("output does not name the manifest's URL:\n%s", out)
	}
	b, err := store.OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := output.ReadManifest(context.Background(), b, "p/q/kind=walks/graph=tiny/algorithm=node2vec/batch=s3/_SUCCESS")
	if err != nil {
		t.Fatal(err)
	}
	if m.Walks != 200 || len(m.Files) != 1 {
		t.Fatalf("manifest %+v", m)
	}
}

// walkstage walk numbers walks like the stage: seed k's walks are
// k*W .. (k+1)*W-1 (message.Request.Job), not round-robin over the seeds.
func TestWalkCommandOrdersWalksLikeTheStage(t *testing.T) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	seedFile := filepath.Join(dir, "seeds.txt")
	os.WriteFile(seedFile, []byte("10\n1990\n30\n"), 0o644)
	out := filepath.Join(dir, "out")
	if msg, err := runWalk(t, "--graph", gp, "--seeds", seedFile, "--walks-per-seed", "3", "--length", "5",
		"--out", "file://"+out, "--batch-id", "order", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	parts, _ := filepath.Glob(filepath.Join(out, "walks", "kind=walks", "*", "*", "batch=order", "part-*.parquet"))
	if len(parts) != 1 {
		t.Fatalf("parts %v", parts)
	}
	data, err := os.ReadFile(parts[0])
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.Read[sink.Row](bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}

	g, err := graph.Load(gp)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	req, err := message.DecodeRequest(nil, []byte(`{"version":1,"batch_id":"order","algorithm":"deepwalk","walks_per_seed":3,"seeds":[10,1990,30]}`),
		g, message.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	stageStarts := req.Job(0).Starts
	if len(rows) != len(stageStarts) {
		t.Fatalf("%d walks, the stage walks %d", len(rows), len(stageStarts))
	}
	for _, r := range rows {
		if want := g.ExternalID(stageStarts[r.WalkID]); r.Start != want {
			t.Errorf("walk %d starts at %d; the stage starts it at %d", r.WalkID, r.Start, want)
		}
	}
}

// walk --algorithm temporal on a graph from graph generate --times: the
// times column (--with-times) holds the start time, then non-decreasing
// times within the gap; the same flags give the same bytes; the manifest
// names the time parameters.
func TestWalkCommandTemporal(t *testing.T) {
	gp := filepath.Join(t.TempDir(), "timed.wsg")
	var out bytes.Buffer
	if err := graphcmd.Commands()["generate"].Run(context.Background(), []string{"--scale", "8", "--edge-factor", "4", "--weighted", "--times", "1000", "--out", gp}, &out, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	type row struct {
		WalkID int64   `parquet:"walk_id"`
		Walk   []int64 `parquet:"walk,list"`
		Times  []int64 `parquet:"times,list"`
	}
	var digests []string
	for range 2 {
		dir := t.TempDir()
		res, err := runWalk(t, "--graph", gp, "--out", "file://"+dir, "--batch-id", "b", "--algorithm", "temporal", "--weighted",
			"--time-bias", "exponential", "--time-scale", "50", "--start-time", "100", "--max-time-gap", "300", "--with-times",
			"--length", "10", "--walks-per-seed", "2")
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		b, err := store.OpenBucket(context.Background(), "file://"+dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := output.ReadManifest(context.Background(), b, "walks/kind=walks/graph=rmat-s8-e4/algorithm=temporal/batch=b/_SUCCESS")
		b.Close()
		if err != nil {
			t.Fatalf("%v\n%s", err, res)
		}
		if a := m.Algorithm; a.TimeBias != "exponential" || a.TimeScale != 50 || a.StartTime == nil || *a.StartTime != 100 ||
			a.MaxTimeGap == nil || *a.MaxTimeGap != 300 || a.Direction != "forward" || a.Sampler != "window" || m.Walks != 512 {
			t.Fatalf("manifest %+v algorithm %+v", m, a)
		}
		steps := 0
		for _, f := range m.Files {
			rows, err := parquet.ReadFile[row](filepath.Join(dir, f.Key))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				if len(r.Times) != len(r.Walk) || r.Times[0] != 100 {
					t.Fatalf("walk %d: %v times %v", r.WalkID, r.Walk, r.Times)
				}
				for i := 1; i < len(r.Times); i++ {
					if d := r.Times[i] - r.Times[i-1]; d < 0 || d > 300 {
						t.Fatalf("walk %d: %v times %v: step %d goes back or past the gap", r.WalkID, r.Walk, r.Times, i)
					}
				}
				steps += len(r.Walk) - 1
			}
		}
		if steps == 0 {
			t.Fatal("no steps")
		}
		digests = append(digests, dirDigest(t, dir))
	}
	if digests[0] != digests[1] {
		t.Fatal("two runs with the same flags differ")
	}
	untimed := walkTestGraph(t)
	for _, tc := range []struct {
		graph string
		args  []string
		want  string
	}{
		{untimed, []string{"--algorithm", "temporal"}, `temporal walks need edge times, and graph "tiny" has none`},
		{gp, []string{"--time-bias", "linear"}, "--time-bias is for temporal, not deepwalk"},
		{gp, []string{"--with-times"}, "--with-times is for temporal"},
		{gp, []string{"--algorithm", "temporal", "--time-bias", "exponential"}, "time_scale > 0"},
		{gp, []string{"--algorithm", "temporal", "--time-bias", "cubic"}, `unknown time_bias "cubic"`},
		{gp, []string{"--algorithm", "temporal", "--direction", "sideways"}, `--direction "sideways"`},
		{gp, []string{"--algorithm", "temporal", "--max-time-gap", "-5"}, "max_time_gap -5 must be 0 or more"},
	} {
		_, err := runWalk(t, append([]string{"--graph", tc.graph, "--out", "file://" + t.TempDir()}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
	if _, err := runWalk(t, "--graph", gp, "--algorithm", "temporal", "--with-times", "--output", "visits"); err == nil || !strings.Contains(err.Error(), "--with-times is for --output walks") {
		t.Errorf("--with-times --output visits: %v", err)
	}
	// --p and --q make it temporal Node2Vec.
	dir := t.TempDir()
	if res, err := runWalk(t, "--graph", gp, "--out", "file://"+dir, "--batch-id", "n", "--algorithm", "temporal", "--p", "2", "--q", "0.5", "--length", "5"); err != nil {
		t.Fatalf("temporal node2vec: %v\n%s", err, res)
	}
	b, err := store.OpenBucket(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	m, err := output.ReadManifest(context.Background(), b, "walks/kind=walks/graph=rmat-s8-e4/algorithm=temporal/batch=n/_SUCCESS")
	if err != nil || m.Algorithm.P != 2 || m.Algorithm.Q != 0.5 {
		t.Fatalf("temporal node2vec manifest %+v: %v", m, err)
	}
}
