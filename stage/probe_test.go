package stage

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/walkstage/walkstage/store"
)

// The object-store probe is one bucket-level request a round, never a
// HEAD of a key (a missing one, every second, filled the store's logs and
// error metrics with not-founds); a missing bucket fails it. A file://
// bucket passes (blob's IsAccessible).
func TestStoreProbeIsBucketLevel(t *testing.T) {
	be := s3mem.New()
	if err := be.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []string
	fake := gofakes3.New(be).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1"} {
		t.Setenv(k, v)
	}
	ctx := context.Background()
	for _, c := range []struct {
		bucket string
		ok     bool
	}{{"walks", true}, {"missing", false}} {
		u := "s3://" + c.bucket + "?endpoint=" + srv.URL + "&use_path_style=true&region=us-east-1"
		b, err := store.OpenBucket(ctx, u)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		mu.Lock()
		seen = nil
		mu.Unlock()
		err = storeProbe(b, u)(ctx)
		if (err == nil) != c.ok {
			t.Errorf("bucket %s: probe says %v", c.bucket, err)
		}
		mu.Lock()
		if len(seen) != 1 || seen[0] != "HEAD /"+c.bucket {
			t.Errorf("bucket %s: the probe sent %q, want one HEAD of the bucket", c.bucket, seen)
		}
		mu.Unlock()
	}

	dir := filepath.Join(t.TempDir(), "out")
	b, err := store.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := storeProbe(b, "file://"+dir)(ctx); err != nil {
		t.Errorf("file bucket: %v", err)
	}
}
