// Package fakes3 serves gofakes3, a real S3 protocol server with an
// in-memory backend, over TCP for tests: a fresh bucket per test, the AWS
// SDK pointed at dummy credentials and no shared configuration, so a test
// never reaches a developer's real account.
package fakes3

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Env points the AWS SDK at dummy credentials and no shared config.
func Env(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", "walkstage")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "walkstage-secret")
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_PROFILE", "")
}

// Serve serves gofakes3 (a fresh in-memory bucket "walks") through the
// handler wrap builds around it (a recorder, a fault injector; nil: none)
// until the test ends, and returns the bucket's s3:// URL.
func Serve(t testing.TB, wrap func(faker http.Handler) http.Handler) (bucketURL string) {
	t.Helper()
	return Bucket(t, "walks", wrap)
}

// Bucket is Serve with a bucket of the given name.
func Bucket(t testing.TB, name string, wrap func(faker http.Handler) http.Handler) (bucketURL string) {
	t.Helper()
	Env(t)
	backend := s3mem.New()
	if err := backend.CreateBucket(name); err != nil {
		t.Fatal(err)
	}
	var h http.Handler = gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server()
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return "s3://" + name + "?" + url.Values{"endpoint": {srv.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()
}
