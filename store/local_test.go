package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"
)

func fileBucket(t testing.TB) (*blob.Bucket, string) {
	dir := t.TempDir()
	b, err := OpenBucket(context.Background(), "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, dir
}

func globT(t testing.TB, dir, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, pattern))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// An exclusive local create is atomic: of two, one links and the other
// finds the object there, and neither leaves a temporary file.
func TestLocalExclusiveCreate(t *testing.T) {
	dir := t.TempDir()
	staging := filepath.Join(dir, TempDirName)
	target := filepath.Join(dir, "a", "b", "_SUCCESS")
	var errs [2]error
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := NewLocalFile(staging, "tag", target, true)
			if err != nil {
				errs[i] = err
				return
			}
			f.Write([]byte{byte('0' + i)})
			errs[i] = f.Close()
		}()
	}
	wg.Wait()
	ok, lost := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, ErrExists) && IsExists(err):
			lost++
		default:
			t.Fatal(err)
		}
	}
	if ok != 1 || lost != 1 {
		t.Fatalf("%d created, %d lost", ok, lost)
	}
	if left := globT(t, staging, "*"); len(left) != 0 {
		t.Fatalf("left in staging: %v", left)
	}
	// A non-exclusive write replaces.
	f, err := NewLocalFile(staging, "tag", target, false)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("x"))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(target); string(data) != "x" {
		t.Fatalf("replaced content %q", data)
	}
}

func TestSweepLocal(t *testing.T) {
	b, root := fileBucket(t)
	old := time.Now().Add(-2 * time.Hour)
	staging := filepath.Join(root, "walks", TempDirName)
	batch := filepath.Join(root, "walks", "graph=g", "algorithm=a", "batch=1")
	for _, d := range []string{staging, batch} {
		if err := os.MkdirAll(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]bool{ // path: removed
		filepath.Join(staging, "0123-part-00000-aaaaaaaaaaaa.parquet.01.tmp"): true,
		filepath.Join(batch, "part-00003.parquet.17f0a.tmp"):                  true,
		filepath.Join(batch, "_SUCCESS.17f0b.tmp"):                            true,
		filepath.Join(batch, "part-00000-aaaaaaaaaaaa.parquet"):               false, // data
		filepath.Join(batch, "notes.tmp"):                                     false, // not ours
		filepath.Join(root, "elsewhere", "part-00000.parquet.17f0c.tmp"):      false, // outside the prefix
	}
	for p := range files {
		os.MkdirAll(filepath.Dir(p), 0o777)
		if err := os.WriteFile(p, []byte("x"), 0o666); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	youngTmp := filepath.Join(staging, "0123-_SUCCESS.02.tmp")
	if err := os.WriteFile(youngTmp, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	files[youngTmp] = false
	st, err := Sweep(context.Background(), b, "walks", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if st.TempFilesRemoved != 3 || st.UploadsAborted != 0 {
		t.Errorf("stats %+v, want 3 files removed", st)
	}
	for p, removed := range files {
		_, err := os.Stat(p)
		if gone := errors.Is(err, os.ErrNotExist); gone != removed {
			t.Errorf("%s: removed %v, want %v", p, gone, removed)
		}
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	fb, root := fileBucket(t)
	if err := Check(ctx, fb, "walks"); err != nil {
		t.Fatalf("file bucket: %v", err)
	}
	if left := listAll(t, fb); len(left) != 0 {
		t.Errorf("probe left %v", left)
	}
	if _, err := os.Stat(filepath.Join(root, "walks", TempDirName)); err != nil {
		t.Errorf("staging directory not created: %v", err)
	}
	u := fakeS3(t)
	if err := Check(ctx, openS3(t, u), "walks"); err != nil {
		t.Fatalf("s3 bucket: %v", err)
	}
	missing := openS3(t, strings.Replace(u, "s3://walks?", "s3://nosuchbucket?", 1))
	if err := Check(ctx, missing, "walks"); !errors.Is(err, ErrConfig) {
		t.Fatalf("missing bucket: %v, want ErrConfig", err)
	}
}
