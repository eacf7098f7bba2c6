package stage

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/walkstage/walkstage/message"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// syncBuffer collects a child's output from two pipes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startChild re-executes this test binary as a stage process (TestMain
// runs Main when childEnv is set). Kafka and S3 stay in this process, so
// they outlive the child.
func startChild(t *testing.T, environ []string) (*exec.Cmd, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), environ...), childEnv+"=1")
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return cmd, out
}

// TestCrashMidBatchRecovers kills the stage process with SIGKILL while a
// batch's Parquet parts are being uploaded, restarts it, and checks that
// the batch then completes with output identical to an uninterrupted run,
// and that no reader ever saw a complete-looking partial batch (no
// _SUCCESS before the end; afterwards exactly the manifest's parts).
func TestCrashMidBatchRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	brokers := startKafka(t, 2)
	outURL, bucket := startS3(t)
	gpath, g := testGraph(t, 14)
	// Small parts without compression: the batch is uploaded as dozens of
	// objects over a second or more, which leaves time to kill mid-batch.
	sinkEnv := []string{"WALKSTAGE_OUTPUT_FILE_BYTES=65536", "WALKSTAGE_OUTPUT_ROW_GROUP_WALKS=2000",
		"WALKSTAGE_OUTPUT_COMPRESSION=none", "WALKSTAGE_CPU_WORKERS=1"}
	environ := stageEnviron(brokers, gpath, outURL, sinkEnv...)
	body := `{"version":1,"batch_id":"crash-1","algorithm":"deepwalk","length":100,"walks_per_seed":8,"seed_range":{"first":0,"count":16384}}`
	dir := "walks/kind=walks/graph=rmat/algorithm=deepwalk/batch=crash-1/"

	child, out1 := startChild(t, environ)
	produce(t, brokers, "in", requestRaw("crash-1", body))

	// Kill as soon as parts are visible but before the manifest.
	var parts []string
	for {
		if ctx.Err() != nil {
			t.Fatalf("no part appeared; child output:\n%s", out1.String())
		}
		keys := listKeys(t, bucket, dir)
		if slices.Contains(keys, dir+output.SuccessName) {
			t.Fatalf("the batch completed before it could be killed; make it larger. child output:\n%s", out1.String())
		}
		if len(keys) > 0 {
			parts = keys
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	after := listKeys(t, bucket, dir)
	if slices.Contains(after, dir+output.SuccessName) {
		t.Fatal("_SUCCESS exists after the kill: the batch was not interrupted mid-way")
	}
	t.Logf("killed with %d part(s) visible (%d after the kill), no _SUCCESS", len(parts), len(after))

	obs := newObserver(brokers, "out")
	defer obs.Close()
	child2, out2 := startChild(t, environ)
	events, err := obs.events(ctx, func(m map[string][]message.Event) bool { return len(m["crash-1"]) > 0 })
	if err != nil {
		t.Fatalf("no completion event after the restart: %v\nchild output:\n%s", err, out2.String())
	}
	ev := events["crash-1"][0]
	if ev.Status != message.StatusSucceeded || ev.Walks != 16384*8 {
		t.Fatalf("event %+v", ev)
	}
	// A graceful stop of the restarted stage exits 0.
	child2.Process.Signal(syscall.SIGTERM)
	if err := child2.Wait(); err != nil {
		t.Errorf("restarted stage did not exit cleanly after SIGTERM: %v\n%s", err, out2.String())
	}

	man, err := output.ReadManifest(ctx, bucket, dir+output.SuccessName)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{dir + output.SuccessName}
	for _, f := range man.Files {
		want = append(want, f.Key)
	}
	slices.Sort(want)
	if got := listKeys(t, bucket, dir); !slices.Equal(got, want) {
		t.Errorf("after recovery the bucket has %d objects, the manifest names %d", len(got), len(want))
	}

	// The same request walked and written by an uninterrupted run, in this
	// process, under another prefix: every part must be byte-identical.
	req, err := message.DecodeRequest([]byte("crash-1"), []byte(body), g, message.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	eng, err := cpu.New(g)
	if err != nil {
		t.Fatal(err)
	}
	w, err := sink.NewBatchWriter(ctx, bucket, "ref", sink.BatchMeta{BatchID: req.BatchID, Algorithm: req.Algorithm, Seed: req.RNGSeed,
		Engine: "cpu", WalkstageVersion: "test", Walks: int64(req.NumWalks())}, g,
		sink.WithCompression(sink.None), sink.WithFileBytes(65536), sink.WithRowGroupRows(2000), sink.WithMemoryLimit(128<<20))
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Run(ctx, []walk.Job{req.Job(0)}, func(c walk.Chunk) error { return w.Write(ctx, c) }); err != nil {
		t.Fatal(err)
	}
	ref, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ref.Files) != len(man.Files) || ref.Walks != man.Walks || ref.Steps != man.Steps {
		t.Fatalf("reference run: %d files %d walks %d steps; recovered: %d files %d walks %d steps",
			len(ref.Files), ref.Walks, ref.Steps, len(man.Files), man.Walks, man.Steps)
	}
	for i := range ref.Files {
		a, err := bucket.ReadAll(ctx, ref.Files[i].Key)
		if err != nil {
			t.Fatal(err)
		}
		b, err := bucket.ReadAll(ctx, man.Files[i].Key)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("part %d (%s) differs from the uninterrupted run", i, man.Files[i].Key)
		}
	}
	if !strings.HasSuffix(ev.Manifest, dir+output.SuccessName) || len(ev.Objects) != len(man.Files) {
		t.Errorf("event points at %s with %d objects", ev.Manifest, len(ev.Objects))
	}
	t.Logf("recovered batch: %d parts, %d walks, %d steps, identical to the uninterrupted run", len(man.Files), man.Walks, man.Steps)
}
