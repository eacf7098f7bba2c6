package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/fakes3"
)

func s3Env(t testing.TB) { fakes3.Env(t) }

// fakeS3 serves gofakes3 over TCP and returns an s3:// URL for a fresh
// bucket on it.
func fakeS3(t testing.TB) (bucketURL string) { return fakes3.Serve(t, nil) }

// serveFakeS3 is fakeS3 through the handler wrap builds around it.
func serveFakeS3(t testing.TB, wrap func(faker http.Handler) http.Handler) (bucketURL string) {
	return fakes3.Serve(t, wrap)
}

func openS3(t testing.TB, u string) *blob.Bucket {
	t.Helper()
	b, err := OpenBucket(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// listAll returns every key in the bucket.
func listAll(t testing.TB, b *blob.Bucket) []string {
	t.Helper()
	var keys []string
	it := b.List(nil)
	for {
		obj, err := it.Next(context.Background())
		if err != nil {
			break
		}
		keys = append(keys, obj.Key)
	}
	return keys
}

// Uploads that overlap reuse the bucket's connections from one round to
// the next: the client keeps more idle connections than a stage uploads at
// once (the SDK's default of 10 closed the rest and dialled them again).
func TestS3KeepsConnections(t *testing.T) {
	s3Env(t)
	backend := s3mem.New()
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()))
	srv := httptest.NewUnstartedServer(faker.Server())
	var dialled atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dialled.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	if err := backend.CreateBucket("walks"); err != nil {
		t.Fatal(err)
	}
	b := openS3(t, "s3://walks?"+url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode())
	const parallel, rounds = 32, 4
	body := bytes.Repeat([]byte("walk"), 1<<10)
	for r := range rounds {
		var wg sync.WaitGroup
		errs := make([]error, parallel)
		for i := range parallel {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = b.WriteAll(context.Background(), fmt.Sprintf("k/%d/%d", r, i), body, nil)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
	}
	// The first round dials up to parallel connections; later rounds find
	// them idle.
	if n := dialled.Load(); n > parallel+parallel/4 {
		t.Fatalf("%d connections dialled for %d rounds of %d uploads, want about %d", n, rounds, parallel, parallel)
	}
}
