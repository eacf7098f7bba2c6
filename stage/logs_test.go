package stage

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/walk/cpu"
)

// The batch-succeeded line gives its durations as float seconds under
// _seconds keys, as the event's timings and the metrics do, in the
// logger the stage builds from its configuration (JSON).
func TestLogDurationsInSeconds(t *testing.T) {
	b, _ := flakyS3(t)
	src, evs := newMemSource(), &memEvents{}
	var logs lockedBuffer
	_, g := testGraphCached(t)
	eng, err := cpu.New(g, cpu.WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	s, err := New(Options{Graph: g, Engine: eng, Source: src, Events: evs, Bucket: b, BucketURL: "s3://walks", Prefix: "walks",
		Logger: config.NewLogger(config.Config{LogFormat: "json", LogLevel: "debug"}, &logs)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	src.send(t, "b1", `{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[1,2,3],"length":5}`)
	waitFor(t, "the batch's event", 20*time.Second, func() bool { return len(evs.all()) == 1 })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var succeeded map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not one JSON object a line: %q: %v", line, err)
		}
		for k, v := range m {
			if strings.HasSuffix(k, "_seconds") {
				if _, ok := v.(float64); !ok {
					t.Errorf("%s is %T in %s", k, v, line)
				}
			}
			if k == "duration" || k == "commit" {
				t.Errorf("a duration without _seconds: %s", line)
			}
		}
		if m["msg"] == "batch succeeded" {
			succeeded = m
		}
	}
	if succeeded == nil {
		t.Fatalf("no batch succeeded line in\n%s", logs.String())
	}
	for _, k := range []string{"duration_seconds", "commit_seconds"} {
		// Seconds, not nanoseconds: a batch of three short walks takes
		// well under a minute.
		if v, ok := succeeded[k].(float64); !ok || v < 0 || v > 60 {
			t.Errorf("batch succeeded: %s = %v, want seconds", k, succeeded[k])
		}
	}
}
