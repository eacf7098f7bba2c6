package walkcmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
)

// `walkstage walk` refuses to replace an output its batch id already has
// from other parameters, naming it, as the stage answers batch_id_conflict;
// the same parameters again keep it, and --replace-output replaces it,
// leaving none of its parts.
func TestWalkRefusesOtherParametersUnderBatchID(t *testing.T) {
	gp := walkTestGraph(t)
	base := []string{"--graph", gp, "--engine", "cpu", "--quiet", "--seeds", "0-500"} // default batch id seed-42
	for _, tc := range []struct {
		name        string
		first, next []string
		manifest    string // of the first run, under the output directory
	}{
		{"walks, other length", []string{"--length", "10"}, []string{"--length", "12"},
			"walks/kind=walks/graph=tiny/algorithm=deepwalk/batch=seed-42/_SUCCESS"},
		{"walks, other encoding", []string{"--length", "10"}, []string{"--length", "10", "--walk-encoding", "byte_stream_split"},
			"walks/kind=walks/graph=tiny/algorithm=deepwalk/batch=seed-42/_SUCCESS"},
		{"walks, other algorithm", []string{"--length", "10"}, []string{"--algorithm", "node2vec", "--length", "10"},
			"walks/kind=walks/graph=tiny/algorithm=deepwalk/batch=seed-42/_SUCCESS"},
		{"visits, other top-k", []string{"--algorithm", "ppr", "--output", "visits", "--steps-per-query", "200", "--top-k", "5"},
			[]string{"--algorithm", "ppr", "--output", "visits", "--steps-per-query", "200", "--top-k", "6"},
			"walks/kind=visits/graph=tiny/algorithm=ppr/batch=seed-42/_SUCCESS"},
		{"samples, other fanouts", []string{"--algorithm", "neighbor", "--fanouts", "3,2"}, []string{"--algorithm", "neighbor", "--fanouts", "3,3"},
			"walks/kind=samples/graph=tiny/algorithm=neighbor/batch=seed-42/_SUCCESS"},
		{"samples, then walks", []string{"--algorithm", "neighbor", "--fanouts", "3,2"}, []string{"--length", "10"},
			"walks/kind=samples/graph=tiny/algorithm=neighbor/batch=seed-42/_SUCCESS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append(append([]string{}, base...), "--out", "file://"+dir)
			if out, err := runWalk(t, append(args, tc.first...)...); err != nil {
				t.Fatalf("first run: %v\n%s", err, out)
			}
			before := dirDigest(t, dir)
			first := mustRead(t, filepath.Join(dir, tc.manifest))

			out, err := runWalk(t, append(args, tc.next...)...)
			if !errors.Is(err, sink.ErrBatchConflict) {
				t.Fatalf("other parameters under the same batch id: %v, want ErrBatchConflict\n%s", err, out)
			}
			for _, want := range []string{"batch seed-42", "--replace-output", filepath.ToSlash(filepath.Join(dir, tc.manifest))} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not name %q: %v", want, err)
				}
			}
			if after := dirDigest(t, dir); after != before {
				t.Fatal("the refused run changed the output")
			}

			// The same parameters again: the output stands.
			if out, err := runWalk(t, append(args, tc.first...)...); err != nil {
				t.Fatalf("the same parameters again: %v\n%s", err, out)
			}
			if again := mustRead(t, filepath.Join(dir, tc.manifest)); !bytes.Equal(again, first) {
				t.Error("the same parameters again changed the manifest")
			}

			// --replace-output: the new run's output is the batch, the
			// earlier one is gone.
			if out, err := runWalk(t, append(append(args, tc.next...), "--replace-output")...); err != nil {
				t.Fatalf("--replace-output: %v\n%s", err, out)
			}
			found := findManifests(t, dir)
			if len(found) != 1 {
				t.Fatalf("manifests after --replace-output: %v, want one", found)
			}
			m, err := output.DecodeManifest(mustRead(t, filepath.Join(dir, found[0])))
			if err != nil {
				t.Fatal(err)
			}
			if found[0] == tc.manifest && bytes.Equal(mustRead(t, filepath.Join(dir, found[0])), first) {
				t.Fatal("--replace-output kept the earlier output")
			}
			parts := map[string]bool{}
			for _, f := range m.Files {
				parts[f.Key] = true
			}
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				rel, _ := filepath.Rel(dir, p)
				if err == nil && strings.HasSuffix(p, ".parquet") && !parts[filepath.ToSlash(rel)] {
					t.Errorf("part %s of the replaced output is still there", rel)
				}
				return err
			})
		})
	}
}

// An output written without a request fingerprint (by an earlier version)
// cannot be compared, so a run of its batch id is refused too.
func TestWalkRefusesOutputWithoutFingerprint(t *testing.T) {
	gp := walkTestGraph(t)
	dir := t.TempDir()
	args := []string{"--graph", gp, "--engine", "cpu", "--quiet", "--length", "5", "--out", "file://" + dir}
	if out, err := runWalk(t, args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	key := filepath.Join(dir, "walks/kind=walks/graph=tiny/algorithm=deepwalk/batch=seed-42/_SUCCESS")
	m, err := output.DecodeManifest(mustRead(t, key))
	if err != nil || m.Fingerprint == "" {
		t.Fatalf("manifest %v, %+v: want a fingerprint", err, m)
	}
	data := bytes.Replace(mustRead(t, key), []byte(`"fingerprint": "`+m.Fingerprint+`",`), nil, 1)
	if bytes.Contains(data, []byte(m.Fingerprint)) {
		t.Fatalf("fingerprint not removed from %s", data)
	}
	if err := os.WriteFile(key, data, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = runWalk(t, args...)
	if !errors.Is(err, sink.ErrBatchConflict) || !strings.Contains(err.Error(), "without a request fingerprint") {
		t.Fatalf("got %v, want a conflict naming the missing fingerprint", err)
	}
	if out, err := runWalk(t, append(args, "--replace-output")...); err != nil {
		t.Fatalf("--replace-output: %v\n%s", err, out)
	}
}

// findManifests lists the _SUCCESS objects under dir, relative to it.
func findManifests(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == output.SuccessName {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
