package stage

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/stage/config"
)

// lockedBuffer is the log output the recording handler writes to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// recordingLogger records every record, debug included, as JSON lines.
func recordingLogger() (*slog.Logger, *lockedBuffer) {
	buf := &lockedBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

const secretPass = "Pa55-w0rd-not-for-logs"

// TestStageStartNeverLogsURLCredentials starts the stage the way `walkstage
// run` does (config.Load, FromConfig, Run) with a password in the userinfo
// of WALKSTAGE_GRAPH and WALKSTAGE_OUTPUT_URL, walks one batch and stops;
// the password is in none of the records a caller's own log handler got,
// nor in what Describe prints for `run --check`.
func TestStageStartNeverLogsURLCredentials(t *testing.T) {
	ctx := context.Background()
	brokers := startKafka(t, 1)
	outURL, bucket := startS3(t)
	gpath, _ := testGraph(t, 8)
	data, err := os.ReadFile(gpath)
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "graphs/g.wsg", data, nil); err != nil {
		t.Fatal(err)
	}
	// gocloud's s3 opener names the bucket by the host and ignores the
	// userinfo, so the stage runs with these URLs.
	query := strings.TrimPrefix(outURL, "s3://walks")
	graphURL := "s3://alice:" + secretPass + "@walks/graphs/g.wsg" + query
	credOutURL := "s3://bob:" + secretPass + "@walks" + query
	c, err := config.Load(stageEnviron(brokers, graphURL, credOutURL, "WALKSTAGE_LOG_LEVEL=debug"))
	if err != nil {
		t.Fatal(err)
	}
	log, logs := recordingLogger()
	rt, err := FromConfig(ctx, c, log, "test")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- rt.Run(runCtx) }()
	waitFor(t, "ready", 30*time.Second, func() bool { return rt.ready() == nil })
	obs := newObserver(brokers, "out")
	defer obs.Close()
	produce(t, brokers, "in", request("r1", map[string]any{"algorithm": "deepwalk", "seeds": []int{1, 2}, "length": 4}))
	ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
	defer ecancel()
	if _, err := obs.events(ectx, func(m map[string][]message.Event) bool { return len(m["r1"]) > 0 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rt.Close()

	out := logs.String()
	if strings.Contains(out, secretPass) {
		t.Errorf("the password was logged:\n%s", out)
	}
	if !strings.Contains(out, "alice:xxxxx@walks") {
		t.Errorf("the graph URL was not logged (redacted) at all; the test proves nothing:\n%s", out)
	}
	for _, v := range config.Describe(c) {
		if strings.Contains(v.Value, secretPass) {
			t.Errorf("Describe: %s=%s", v.Name, v.Value)
		}
	}
}

// TestFailedStartNeverReportsURLCredentials: the errors of a start that
// fails (a bucket URL the store library refuses, a broker address with
// userinfo) quote the URL, and the libraries quote it again inside; none
// of that text carries the secrets, neither the returned error nor the logs.
func TestFailedStartNeverReportsURLCredentials(t *testing.T) {
	brokers := startKafka(t, 1)
	outURL, _ := startS3(t)
	gpath, _ := testGraph(t, 8)
	query := strings.TrimPrefix(outURL, "s3://walks")
	for _, c := range []struct {
		name    string
		environ []string
	}{
		{"output URL with a token the store refuses", stageEnviron(brokers, gpath,
			"s3://bob:"+secretPass+"@walks"+query+"&token="+secretPass, "WALKSTAGE_METRICS_ADDR=")},
		{"graph URL the store refuses", stageEnviron(brokers, "s3://alice:"+secretPass+"@walks/g.wsg"+query+"&session_key="+secretPass,
			outURL, "WALKSTAGE_METRICS_ADDR=")},
		{"broker address with userinfo", stageEnviron([]string{"alice:" + secretPass + "@kafka:9092"}, gpath, outURL,
			"WALKSTAGE_METRICS_ADDR=")},
	} {
		t.Run(c.name, func(t *testing.T) {
			logs := &lockedBuffer{}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := Main(ctx, c.environ, logs, "test")
			if err == nil {
				t.Fatal("started")
			}
			if strings.Contains(err.Error(), secretPass) {
				t.Errorf("error: %v", err)
			}
			if strings.Contains(logs.String(), secretPass) {
				t.Errorf("logs:\n%s", logs)
			}
		})
	}
}
