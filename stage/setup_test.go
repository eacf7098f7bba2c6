package stage

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/walkstage/walkstage/store"
)

// TestMainAnswersProbesWhileLoading serves the graph from a slow object
// store: during the download /healthz is 200 and /readyz 503 on the
// configured port; once the stage runs, the same port says ready; SIGTERM
// (ctx) stops Main cleanly.
func TestMainAnswersProbesWhileLoading(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	path, _ := testGraph(t, 8)
	be := s3mem.New()
	be.CreateBucket("walks")
	fake := gofakes3.New(be).Server()
	var slow atomic.Bool
	slow.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "graphs/") && slow.Load() {
			time.Sleep(1500 * time.Millisecond)
		}
		fake.ServeHTTP(w, r)
	}))
	defer srv.Close()
	os.Setenv("AWS_ACCESS_KEY_ID", "test")
	os.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	data, _ := os.ReadFile(path)
	q := "?endpoint=" + srv.URL + "&use_path_style=true&region=us-east-1"
	b, err := store.OpenBucket(context.Background(), "s3://walks"+q)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.WriteAll(context.Background(), "graphs/g.wsg", data, nil); err != nil {
		t.Fatal(err)
	}
	b.Close()
	brokers := startKafka(t, 1)
	var (
		addr   string
		ctx    context.Context
		cancel context.CancelFunc
		done   chan error
	)
	client := &http.Client{Timeout: 2 * time.Second}
	get := func(p string) int {
		resp, err := client.Get("http://" + addr + p)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(10 * time.Second)
	// The port is picked free and released before Main binds it; another
	// test's process can take it in between. Main then fails to listen,
	// and the stage is started again on another port.
	start := func() (lost bool) {
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		addr = l.Addr().String()
		l.Close()
		env := stageEnviron(brokers, "s3://walks/graphs/g.wsg"+q, "s3://walks"+q, "WALKSTAGE_METRICS_ADDR="+addr)
		ctx, cancel = context.WithCancel(context.Background())
		done = make(chan error, 1)
		go func() { done <- Main(ctx, env, logSink(), "test") }()
		for get("/healthz") != 200 {
			select {
			case err := <-done:
				cancel()
				if err != nil && strings.Contains(err.Error(), "address already in use") {
					return true
				}
				t.Fatalf("Main returned before /healthz answered: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("no /healthz while loading")
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	for try := 1; start(); try++ {
		if try == 3 {
			t.Fatal("the metrics port was taken by another process three times")
		}
	}
	if code := get("/readyz"); code != 503 {
		t.Errorf("/readyz while loading: %d", code)
	}
	for get("/readyz") != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("never ready: /readyz %d, /healthz %d", get("/readyz"), get("/healthz"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := get("/metrics"); code != 200 {
		t.Errorf("/metrics: %d", code)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func logSink() io.Writer {
	if os.Getenv("WALKSTAGE_TEST_VERBOSE") != "" {
		return os.Stderr
	}
	return io.Discard
}
