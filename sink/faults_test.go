package sink

import (
	"context"
	"errors"
	"hash/crc32"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/s3fault"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
)

// faultyS3 serves gofakes3 behind the fault proxy (internal/s3fault) with
// rules and returns the bucket's s3:// URL, through the proxy, and the
// proxy.
func faultyS3(t testing.TB, rules ...s3fault.Rule) (bucketURL string, p *s3fault.Proxy) {
	t.Helper()
	direct, err := url.Parse(fakeS3(t))
	if err != nil {
		t.Fatal(err)
	}
	q := direct.Query()
	p, err = s3fault.New(s3fault.Config{Target: q.Get("endpoint"), Seed: 32, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	q.Set("endpoint", srv.URL)
	direct.RawQuery = q.Encode()
	return direct.String(), p
}

// checkOutput fails unless the batch directory holds exactly m's parts and
// manifest, the manifest stored is m, and every part has the size and
// CRC32C m lists.
func checkOutput(t testing.TB, b *blob.Bucket, l output.Layout, m *output.Manifest) {
	t.Helper()
	ctx := context.Background()
	if m == nil {
		t.Fatal("no manifest")
	}
	stored, err := output.ReadManifest(ctx, b, l.SuccessKey())
	if err != nil {
		t.Fatalf("stored manifest: %v", err)
	}
	if !sameFiles(stored, m) || stored.Fingerprint != m.Fingerprint {
		t.Fatalf("stored manifest lists %d files, not the %d Commit returned", len(stored.Files), len(m.Files))
	}
	if got, want := batchKeys(t, b, l.Dir), manifestKeys(m, l.Dir); !slices.Equal(got, want) {
		t.Fatalf("batch directory holds\n%v\nmanifest lists\n%v", got, want)
	}
	for _, f := range m.Files {
		data, err := b.ReadAll(ctx, f.Key)
		if err != nil {
			t.Fatalf("part %s listed by the manifest: %v", f.Key, err)
		}
		if int64(len(data)) != f.Bytes || store.CRC32CString(crc32.Checksum(data, castagnoli)) != f.CRC32C {
			t.Fatalf("part %s: %d bytes, CRC32C %s; manifest says %d, %s", f.Key, len(data),
				store.CRC32CString(crc32.Checksum(data, castagnoli)), f.Bytes, f.CRC32C)
		}
	}
}

var successKey = regexp.MustCompile(`/` + output.SuccessName + `$`)

// A create-if-absent put of the manifest that lands but whose answer is
// lost is retried by the SDK and refused (412) by the writer's own
// manifest. That is a success: the output stays whole, no part is deleted
// (before the fix the writer took its own manifest for another writer's
// and deleted the parts it lists).
func TestManifestCreateLostAck(t *testing.T) {
	g := testGraph(t)
	const n = 2000
	chunks := runEngine(t, g, testAlgo, n, 33)
	for _, tc := range []struct {
		name  string
		fault s3fault.Fault
		times int
		fp    string
	}{
		{"connection dropped", s3fault.LostAck, 1, "fp"},
		{"answered 500", s3fault.LostAckStatus, 1, "fp"},
		{"connection dropped, no fingerprint", s3fault.LostAck, 1, ""},
		// The SDK gives up: the manifest read back is ours.
		{"every answer lost", s3fault.LostAck, 0, "fp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, p := faultyS3(t, s3fault.Rule{Name: "ack", Op: s3fault.OpPutObject, Key: successKey, IfNoneMatch: true, Fault: tc.fault, Times: tc.times})
			b := openS3(t, u)
			// A part a killed attempt left, which the commit removes.
			l, err := output.BatchLayout("walks", output.KindWalks, g.Name, testAlgo.Kind.String(), "ack")
			if err != nil {
				t.Fatal(err)
			}
			if err := b.WriteAll(context.Background(), l.AttemptPartKey(0, "0123456789ab"), []byte("killed"), nil); err != nil {
				t.Fatal(err)
			}
			w := writeAll(t, b, fpMeta("ack", n, tc.fp), chunks, WithRowGroupRows(250), WithFileBytes(1))
			m, err := w.Commit(context.Background())
			<-w.Tidied()
			if err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if p.Injected("ack") == 0 {
				t.Fatalf("faults injected: %v", p.Stats())
			}
			if len(m.Files) < 2 {
				t.Fatalf("%d parts, want several", len(m.Files))
			}
			checkOutput(t, b, w.Layout(), m)
			compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
		})
	}
}

// Lost answers to part puts (retried, so stored twice) and to multipart
// completes (the retry finds no upload) end with a consistent output:
// Commit succeeds with every listed part whole, or fails leaving no part,
// and the batch written again succeeds.
func TestPartLostAcks(t *testing.T) {
	ctx := context.Background()
	small := func(t *testing.T) (*BatchMeta, []walk.Chunk, []Option) {
		g := testGraph(t)
		m := fpMeta("parts", 2000, "fp")
		return &m, runEngine(t, g, testAlgo, 2000, 34), []Option{WithRowGroupRows(250), WithFileBytes(1)}
	}
	big := func(t *testing.T) (*BatchMeta, []walk.Chunk, []Option) {
		const n = 80000 // ~18 MB uncompressed: one part above store's single-PUT threshold (16 MiB), so multipart
		algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 80}
		m := BatchMeta{BatchID: "parts", Algorithm: algo, Seed: 1, Engine: "cpu", Walks: n, Fingerprint: "fp"}
		return &m, bigChunks(ringGraph(t, 1<<20), n, 80, 1000), []Option{WithCompression(None), WithUploadBuffer(5<<20, 2), WithFileBytes(64 << 20)}
	}
	part := regexp.MustCompile(`/part-`)
	for _, tc := range []struct {
		name  string
		batch func(t *testing.T) (*BatchMeta, []walk.Chunk, []Option)
		rule  s3fault.Rule
	}{
		{"part put, connection dropped", small, s3fault.Rule{Op: s3fault.OpPutObject, Key: part, Fault: s3fault.LostAck, Times: 3}},
		{"part put, answered 500", small, s3fault.Rule{Op: s3fault.OpPutObject, Key: part, Fault: s3fault.LostAckStatus, Times: 3}},
		{"upload part, connection dropped", big, s3fault.Rule{Op: s3fault.OpUploadPart, Key: part, Fault: s3fault.LostAck, Times: 2}},
		{"multipart complete, connection dropped", big, s3fault.Rule{Op: s3fault.OpCompleteMulti, Key: part, Fault: s3fault.LostAck, Times: 1}},
		{"multipart complete, answered 500", big, s3fault.Rule{Op: s3fault.OpCompleteMulti, Key: part, Fault: s3fault.LostAckStatus, Times: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meta, chunks, opts := tc.batch(t)
			tc.rule.Name = "fault"
			u, p := faultyS3(t, tc.rule)
			b := openS3(t, u)
			g := testGraph(t)
			if meta.Algorithm.Kind == walk.DeepWalk {
				g = ringGraph(t, 1<<20)
			}
			w, err := NewBatchWriter(ctx, b, "walks", *meta, g, opts...)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range chunks {
				if err := w.Write(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			m, err := w.Commit(ctx)
			if p.Injected("fault") == 0 {
				if m != nil {
					t.Logf("first part %d bytes", m.Files[0].Bytes)
				}
				t.Fatalf("no fault injected: %v", p.Stats())
			}
			if err == nil {
				checkOutput(t, b, w.Layout(), m)
				return
			}
			t.Logf("Commit: %v", err)
			if keys := batchKeys(t, b, w.Layout().Dir); len(keys) != 0 {
				t.Fatalf("a failed commit left %v", keys)
			}
			if up := pendingUploads(t, b); up != 0 {
				t.Fatalf("a failed commit left %d uploads open", up)
			}
			p.SetRules()
			w, m = writeBatchBy(t, b, *meta, g, chunks, opts...)
			checkOutput(t, b, w.Layout(), m)
		})
	}
}

// A manifest key the store holds as a phantom (versitygw killed while
// landing a put: creates refused with 412, reads 404) is resolved within a
// bound: by a DELETE and a create where a delete clears it, by a plain put
// where only that does (what versitygw does), and otherwise by
// ErrManifestUnresolvable, never by trying for ever. Before the recovery
// every commit of the batch failed, and the stage retried it without end.
func TestPhantomManifest(t *testing.T) {
	g := testGraph(t)
	const n = 1000
	chunks := runEngine(t, g, testAlgo, n, 35)
	ctx := context.Background()
	opts := []Option{WithRowGroupRows(250), WithFileBytes(1), WithCallTimeout(300 * time.Millisecond)}
	for _, tc := range []struct {
		name string
		// killed makes the phantom from the writer's own create (the
		// store dies landing it); else it is there before.
		killed   bool
		kind     s3fault.PhantomKind
		resolved bool
	}{
		{"own create killed, cleared by a plain put (versitygw)", true, s3fault.ClearedByPut, true},
		{"left by a killed writer, cleared by a plain put (versitygw)", false, s3fault.ClearedByPut, true},
		{"left by a killed writer, cleared by a delete", false, s3fault.ClearedByDelete, true},
		{"never cleared", false, s3fault.Sticky, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rules []s3fault.Rule
			if tc.killed {
				rules = append(rules, s3fault.Rule{Op: s3fault.OpPutObject, Key: successKey, IfNoneMatch: true, Fault: s3fault.PhantomCreate, Phantom: tc.kind, Times: 1})
			}
			u, p := faultyS3(t, rules...)
			b := openS3(t, u)
			w := writeAll(t, b, fpMeta("phantom", n, "fp"), chunks, opts...)
			if !tc.killed {
				p.Phantom("walks", w.Layout().SuccessKey(), tc.kind)
			}
			// commit fails the test if Commit is still trying after far
			// longer than the recovery's bound; how long it took is not
			// asserted.
			commit := func(w *BatchWriter) (m *output.Manifest, err error) {
				done := make(chan struct{})
				go func() {
					defer close(done)
					m, err = w.Commit(ctx)
				}()
				select {
				case <-done:
				case <-time.After(2 * time.Minute):
					t.Fatal("Commit still trying after 2 minutes")
				}
				return m, err
			}
			m, err := commit(w)
			if tc.killed && errors.Is(err, errUnsure) {
				// The SDK's retry of the reset create outlived the call
				// timeout: the outcome is unknown, the parts are kept, and
				// the batch is written again, as the stage does.
				t.Logf("first attempt: %v", err)
				w = writeAll(t, b, fpMeta("phantom", n, "fp"), chunks, opts...)
				m, err = commit(w)
			}
			if !tc.resolved {
				if !errors.Is(err, ErrManifestUnresolvable) {
					t.Fatalf("Commit: %v, want ErrManifestUnresolvable", err)
				}
				if IsRequestError(err) {
					t.Fatalf("an unresolvable manifest is not the request's fault: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Commit: %v", err)
			}
			if p.IsPhantom("walks", w.Layout().SuccessKey()) {
				t.Fatal("the phantom is still there")
			}
			checkOutput(t, b, w.Layout(), m)
			if got, err := Lookup(ctx, b, "walks", "phantom", "fp"); err != nil || got == nil || !sameFiles(got, m) {
				t.Fatalf("Lookup after the recovery = %v, %v", got, err)
			}
		})
	}
}

// A manifest that refused our create but cannot be read back may be ours
// (here it is: the create landed, its answer was lost, and the read that
// followed was cut short). The commit fails, but keeps the parts the
// manifest lists; the batch's retry finds the output whole (before, the
// failed commit deleted them and left a manifest listing nothing).
func TestUnreadableRefusingManifestKeepsParts(t *testing.T) {
	g := testGraph(t)
	const n = 2000
	chunks := runEngine(t, g, testAlgo, n, 36)
	ctx := context.Background()
	u, p := faultyS3(t,
		s3fault.Rule{Name: "ack", Op: s3fault.OpPutObject, Key: successKey, IfNoneMatch: true, Fault: s3fault.LostAck, Times: 1},
		s3fault.Rule{Name: "cut", Op: s3fault.OpGetObject, Key: successKey, Fault: s3fault.Truncate, Times: 1})
	b := openS3(t, u)
	w := writeAll(t, b, fpMeta("cut", n, "fp"), chunks, WithRowGroupRows(250), WithFileBytes(1))
	_, err := w.Commit(ctx)
	if !errors.Is(err, errUnsure) {
		t.Fatalf("Commit: %v, want a failure that keeps the parts", err)
	}
	if p.Injected("ack") != 1 || p.Injected("cut") != 1 {
		t.Fatalf("faults injected: %v", p.Stats())
	}
	m, err := Lookup(ctx, b, "walks", "cut", "fp")
	if err != nil || m == nil {
		t.Fatalf("Lookup by the batch's retry = %v, %v; want the complete output", m, err)
	}
	checkOutput(t, b, w.Layout(), m)
	compareRows(t, readBatch(t, b, m), expectedRows(g, chunks, n))
}
