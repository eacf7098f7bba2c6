package outputcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/internal/fakes3"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

func runOutput(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = cli.Dispatch(context.Background(), "output", cli.Command{Usage: Usage, Subs: Commands()}, args, &out, &errb)
	return out.String(), errb.String(), err
}

// committedParts reads every _SUCCESS under dir/walks/kind=<kind>/ from disk
// and returns the paths of the parts they list.
func committedParts(t *testing.T, dir, kind string) []string {
	t.Helper()
	var parts []string
	for _, m := range globT(t, filepath.Join(dir, "walks", "kind="+kind, "*", "*", "*", output.SuccessName)) {
		man, err := output.DecodeManifest(mustRead(t, m))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range man.Files {
			parts = append(parts, filepath.Join(dir, filepath.FromSlash(f.Key)))
		}
	}
	slices.Sort(parts)
	return parts
}

func globT(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// lines splits a command's output into sorted lines.
func lines(s string) []string {
	l := strings.Fields(s)
	slices.Sort(l)
	return l
}

// copyFile writes a copy of src at dst, last modified at mod.
func copyFile(t *testing.T, src, dst string, mod time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, mustRead(t, src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dst, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// A glob over a kind's directory reads parts no manifest lists (a losing
// attempt's part beside a committed batch, a killed attempt's directory);
// `output ls` prints exactly the parts the manifests list, and after
// `output tidy` the glob reads the same parts, but for an orphan younger
// than the age, which stays for a later tidy.
func TestOutputLsAndTidyLocal(t *testing.T) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	out := "file://" + dir
	for _, args := range [][]string{
		{"--batch-id", "a", "--length", "10"},
		{"--batch-id", "b", "--length", "10", "--file-bytes", "1", "--row-group-rows", "8"},
		{"--batch-id", "v", "--algorithm", "ppr", "--output", "visits", "--steps-per-query", "200", "--top-k", "5"},
	} {
		if msg, err := runWalk(t, append([]string{"--graph", gp, "--engine", "cpu", "--quiet", "--seeds", "0-300", "--out", out}, args...)...); err != nil {
			t.Fatalf("walk %v: %v\n%s", args, err, msg)
		}
	}
	walks := committedParts(t, dir, "walks")
	visits := committedParts(t, dir, "visits")
	if len(walks) < 3 || len(visits) != 1 {
		t.Fatalf("committed walks parts %v, visits parts %v", walks, visits)
	}
	glob := func(kind string) []string {
		return globT(t, filepath.Join(dir, "walks", "kind="+kind, "*", "*", "*", "*.parquet"))
	}
	if got := glob("walks"); !slices.Equal(got, walks) {
		t.Fatalf("before any orphan the glob reads %v, want %v", got, walks)
	}

	old := time.Now().Add(-2 * time.Hour)
	batchA := filepath.Dir(walks[0])
	lost := filepath.Join(batchA, "part-00000-0123456789ab.parquet")
	killed := filepath.Join(dir, "walks", "kind=walks", "graph=tiny", "algorithm=deepwalk", "batch=killed", "part-00000-aaaaaaaaaaaa.parquet")
	killedVisits := filepath.Join(dir, "walks", "kind=visits", "graph=tiny", "algorithm=ppr", "batch=gone", "part-00000-bbbbbbbbbbbb.parquet")
	young := filepath.Join(dir, "walks", "kind=walks", "graph=tiny", "algorithm=deepwalk", "batch=writing", "part-00000-cccccccccccc.parquet")
	copyFile(t, walks[0], lost, old)
	copyFile(t, walks[0], killed, old)
	copyFile(t, visits[0], killedVisits, old)
	copyFile(t, walks[0], young, time.Now())
	if got := glob("walks"); len(got) != len(walks)+3 {
		t.Fatalf("the glob reads %d parts, want the %d committed and 3 orphans", len(got), len(walks))
	}

	url := func(paths []string) []string {
		var us []string
		for _, p := range paths {
			us = append(us, "file://"+filepath.ToSlash(p))
		}
		slices.Sort(us)
		return us
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--kind", "walks"}, url(walks)},
		{[]string{"--kind", "visits"}, url(visits)},
		{[]string{"--kind", "samples"}, nil},
		{[]string{"--kind", "walks", "--batch", "b"}, url(walks[1:])},
		{[]string{"--kind", "walks", "--batch", "killed"}, nil},
		{[]string{"--kind", "visits", "--batch", "a"}, nil},
	} {
		stdout, stderr, err := runOutput(t, append([]string{"ls", out, "--prefix", "walks"}, c.args...)...)
		if err != nil {
			t.Fatalf("ls %v: %v\n%s", c.args, err, stderr)
		}
		if got := lines(stdout); !slices.Equal(got, c.want) {
			t.Errorf("ls %v prints\n%s\nwant\n%s", c.args, strings.Join(got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	if !strings.HasPrefix(walks[1], filepath.Join(dir, "walks", "kind=walks", "graph=tiny", "algorithm=deepwalk", "batch=b")) {
		t.Fatalf("parts not in batch order: %v", walks)
	}

	stdout, _, err := runOutput(t, "tidy", out, "--older-than", "1h")
	if err != nil {
		t.Fatalf("tidy: %v\n%s", err, stdout)
	}
	if !strings.Contains(stdout, "RESULT removed=3 unlisted=1 abandoned=2 ") || !strings.Contains(stdout, "young_kept=1 ") {
		t.Errorf("tidy reports\n%s", stdout)
	}
	if got, want := glob("walks"), append(slices.Clone(walks), young); !slices.Equal(got, sortedCopy(want)) {
		t.Errorf("after the tidy the glob reads\n%v\nwant the committed parts and the young orphan\n%v", got, want)
	}
	if got := glob("visits"); !slices.Equal(got, visits) {
		t.Errorf("after the tidy the visits glob reads %v, want %v", got, visits)
	}
	for _, m := range globT(t, filepath.Join(dir, "walks", "kind=*", "*", "*", "*", output.SuccessName)) {
		if strings.Contains(m, "batch=killed") || strings.Contains(m, "batch=gone") {
			t.Errorf("a manifest appeared: %s", m)
		}
	}
	if n := len(globT(t, filepath.Join(dir, "walks", "kind=*", "*", "*", "*", output.SuccessName))); n != 3 {
		t.Errorf("%d manifests after the tidy, want 3", n)
	}

	// DuckDB's form: the same parts, quoted, as local paths.
	stdout, _, err = runOutput(t, "ls", out, "--kind", "walks", "--format", "duckdb")
	if err != nil {
		t.Fatal(err)
	}
	want := "read_parquet(['" + strings.Join(walks, "', '") + "'], hive_partitioning=true)\n"
	if stdout != want {
		t.Errorf("--format duckdb prints\n%s\nwant\n%s", stdout, want)
	}
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// On S3 the commands go through the bucket URL a user gives the stage.
func TestOutputLsAndTidyS3(t *testing.T) {
	u := fakes3.Bucket(t, "out", nil)
	if msg, err := runWalk(t, "--graph", walkTestGraph(t), "--out", u, "--prefix", "p/q", "--length", "12", "--batch-id", "s3", "--quiet"); err != nil {
		t.Fatalf("%v\n%s", err, msg)
	}
	ctx := context.Background()
	b, err := store.OpenBucket(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := "p/q/kind=walks/graph=tiny/algorithm=deepwalk/batch=s3"
	m, err := output.ReadManifest(ctx, b, dir+"/_SUCCESS")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{dir + "/part-00000-0123456789ab.parquet", "p/q/kind=walks/graph=tiny/algorithm=deepwalk/batch=killed/part-00000-aaaaaaaaaaaa.parquet"} {
		if err := b.WriteAll(ctx, k, []byte("orphan"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for _, f := range m.Files {
		want = append(want, "s3://out/"+f.Key)
	}
	stdout, stderr, err := runOutput(t, "ls", u, "--prefix", "p/q", "--kind", "walks")
	if err != nil || !slices.Equal(lines(stdout), want) {
		t.Fatalf("ls: %v\n%s\n%s\nwant %v", err, stdout, stderr, want)
	}
	stdout, _, err = runOutput(t, "tidy", u, "--prefix", "p/q", "--older-than", "0s")
	if err != nil || !strings.Contains(stdout, "RESULT removed=2 unlisted=1 abandoned=1 ") {
		t.Fatalf("tidy: %v\n%s", err, stdout)
	}
	var left []string
	it := b.List(nil)
	for {
		o, err := it.Next(ctx)
		if err != nil {
			break
		}
		left = append(left, "s3://out/"+o.Key)
	}
	if want := sortedCopy(append(want, "s3://out/"+dir+"/_SUCCESS")); !slices.Equal(sortedCopy(left), want) {
		t.Errorf("after the tidy the bucket holds %v, want %v", left, want)
	}
}

func TestOutputUsageErrors(t *testing.T) {
	dir := "file://" + t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"cat"}, `unknown subcommand "cat"`},
		{[]string{"ls", "--kind", "walks"}, "missing the bucket URL"},
		{[]string{"ls", dir}, "--kind is required"},
		{[]string{"ls", dir, "--kind", "rows"}, `--kind "rows"`},
		{[]string{"ls", dir, "--kind", "walks", "--format", "csv"}, `--format "csv"`},
		{[]string{"ls", dir, "--kind", "walks", "--format", "duckdb"}, "no committed walks parts"},
		{[]string{"ls", dir, dir, "--kind", "walks"}, "unexpected argument"},
		{[]string{"tidy", dir}, "--older-than is required"},
		{[]string{"tidy", dir, "--older-than", "1h", "--prefix", "a/../b"}, "invalid output layout"},
	} {
		_, stderr, err := runOutput(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("output %v: %v, want an error naming %q\n%s", c.args, err, c.want, stderr)
		}
	}
}
