package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
)

// The suite's own bookkeeping, checked without any process (these run
// under -short too).

func TestBatchDir(t *testing.T) {
	for _, c := range []struct {
		key, id, dir, name string
		ok                 bool
	}{
		{"walks/graph=g/algorithm=deepwalk/batch=ok-1/_SUCCESS", "ok-1", "walks/graph=g/algorithm=deepwalk/batch=ok-1", "_SUCCESS", true},
		{"walks/kind=visits/graph=g/algorithm=ppr/batch=ok-1/_SUCCESS", "ok-1", "walks/kind=visits/graph=g/algorithm=ppr/batch=ok-1", "_SUCCESS", true},
		{"walks/graph=g/algorithm=ppr/batch=ok-1/part-00000-ab.parquet", "ok-1", "walks/graph=g/algorithm=ppr/batch=ok-1", "part-00000-ab.parquet", true},
		{"walks/graph=g/algorithm=ppr/batch=ok-10/_SUCCESS", "ok-1", "", "", false},
		{"walks/graph=g/algorithm=ppr/batch=ok-1.tmp/x", "ok-1", "", "", false},
	} {
		dir, name, ok := batchDir(c.key, c.id)
		if dir != c.dir || name != c.name || ok != c.ok {
			t.Errorf("batchDir(%q, %q) = %q, %q, %v", c.key, c.id, dir, name, ok)
		}
	}
}

func TestObjectKey(t *testing.T) {
	if k, err := objectKey("s3://walks/walks/graph=g/batch=b/_SUCCESS"); err != nil || k != "walks/graph=g/batch=b/_SUCCESS" {
		t.Errorf("got %q, %v", k, err)
	}
	if _, err := objectKey("s3://other/x"); err == nil {
		t.Error("a key in another bucket was accepted")
	}
}

func TestMatchDLQ(t *testing.T) {
	a := &msg{id: "m-1", partition: 2, offset: 7}
	b := &msg{id: "m-2", partition: 0, offset: 3}
	h := func(kv ...string) []kgo.RecordHeader {
		var hs []kgo.RecordHeader
		for i := 0; i < len(kv); i += 2 {
			hs = append(hs, kgo.RecordHeader{Key: kv[i], Value: []byte(kv[i+1])})
		}
		return hs
	}
	recs := []*kgo.Record{
		{Headers: h("walkstage-source-topic", "in", "walkstage-source-partition", "2", "walkstage-source-offset", "7", "walkstage-reason", "malformed")},
		{Headers: h(chaosIDHeader, "m-1", "walkstage-reason", "malformed")}, // a stub without source headers
		{Headers: h(chaosIDHeader, "m-2")},
		{Headers: h("walkstage-source-topic", "in", "walkstage-source-partition", "1", "walkstage-source-offset", "7")},
		// A copy of b (a record of a lost log) whose source position, in
		// the generation it landed in, is a's: the chaos-id decides.
		{Headers: h(chaosIDHeader, "m-2", "walkstage-source-topic", "in", "walkstage-source-partition", "2", "walkstage-source-offset", "7")},
	}
	c := matchDLQ([]*msg{a, b}, recs, nil)
	if len(c.byMsg[a]) != 2 || len(c.byMsg[b]) != 2 || len(c.unmatched) != 1 {
		t.Fatalf("a: %d copies, b: %d, unmatched %d", len(c.byMsg[a]), len(c.byMsg[b]), len(c.unmatched))
	}
	if reasonOf(c.byMsg[b][0]) != "" {
		t.Error("reason invented")
	}
}

// TestMessagesReproducible: one seed, one stream of messages.
func TestMessagesReproducible(t *testing.T) {
	generate := func() []*msg {
		g := newGen(rand.New(rand.NewPCG(5, 0x63686173)), 1024)
		var ms []*msg
		for range 40 {
			ms = append(ms, g.valid(), g.bad())
		}
		ms = append(ms, g.conflict(g.reqs[0]), g.duplicate(g.reqs[1]), g.huge(), g.large(1<<20))
		return ms
	}
	a, b := generate(), generate()
	for i := range a {
		if a[i].id != b[i].id || string(a[i].key) != string(b[i].key) || string(a[i].value) != string(b[i].value) {
			t.Fatalf("message %d differs between two generators with the same seed", i)
		}
	}
	for _, m := range a {
		if m.accepted {
			var v map[string]any
			if err := json.Unmarshal(m.value, &v); err != nil || v["batch_id"] != m.batchID {
				t.Errorf("accepted %s: %v %v", m.id, err, v["batch_id"])
			}
		}
		if m.category == "large-1MiB" && len(m.value) != 1<<20 {
			t.Errorf("large record of %d bytes", len(m.value))
		}
	}
}

func TestParseFaults(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"", strings.Join(faultNames, ","), true},
		{"all", strings.Join(faultNames, ","), true},
		{"kills,s3", "s3,kills", true},
		{"-expensive,-s3", "latetopic,kills,outages,storekill,brokerlost,recreate,oversized", true},
		{"kills,-s3", "", false},
		{"kill", "", false},
	} {
		fs, err := parseFaults(c.in)
		if (err == nil) != c.ok || (c.ok && fs.String() != c.want) {
			t.Errorf("parseFaults(%q) = %v, %v; want %s", c.in, fs, err, c.want)
		}
	}
}

// TestOffsetMonitor: a partition behind its end and unmoved is stuck only
// once the stall bound has passed since the last fault cleared and no
// other partition moves either; a commit past the end is reported at once.
func TestOffsetMonitor(t *testing.T) {
	clock := &faultClock{}
	m := newOffsetMonitor(10*time.Second, clock)
	rel := func(time.Time) string { return "" }
	t0 := time.Now()
	offs := func(p0 int64) map[int32]int64 { return map[int32]int64{0: p0, 1: 5, 2: 5, 3: 5} }
	end := offs(9)
	m.observe(t0, 0, offs(3), end, rel)
	clock.begin("outage")
	m.observe(t0.Add(20*time.Second), 0, offs(3), end, rel) // during a fault: never stuck
	clock.end()
	clock.cleared = t0.Add(25 * time.Second)
	m.observe(t0.Add(30*time.Second), 0, offs(3), end, rel) // 5 s after it cleared
	if stuck, _, _ := m.findings(); len(stuck) != 0 {
		t.Fatalf("stuck too early: %v", stuck)
	}
	busy := offs(3)
	busy[1] = 4 // the stage works on another partition
	m.observe(t0.Add(36*time.Second), 0, busy, end, rel)
	if stuck, _, _ := m.findings(); len(stuck) != 0 {
		t.Fatalf("stuck while another partition moves: %v", stuck)
	}
	end[1] = 9
	m.observe(t0.Add(38*time.Second), 0, busy, end, rel)
	m.observe(t0.Add(40*time.Second), 0, busy, end, rel)
	if stuck, _, _ := m.findings(); len(stuck) != 0 {
		t.Fatalf("stuck 4 s after another partition moved: %v", stuck)
	}
	m.observe(t0.Add(42*time.Second), 0, busy, end, rel)
	m.observe(t0.Add(44*time.Second), 0, busy, end, rel) // reported once per episode
	stuck, ahead, _ := m.findings()
	if len(stuck) != 1 || len(ahead) != 0 {
		t.Fatalf("stuck %v, ahead %v", stuck, ahead)
	}
	m.observe(t0.Add(45*time.Second), 0, offs(12), end, rel)
	m.observe(t0.Add(46*time.Second), 1, offs(99), end, rel) // another generation: ignored
	if _, ahead, _ := m.findings(); len(ahead) != 1 {
		t.Fatalf("ahead %v", ahead)
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	if p := percentile(ds, 0.5); p != 50*time.Millisecond {
		t.Errorf("p50 %v", p)
	}
	if p := percentile(ds, 0.99); p != 99*time.Millisecond {
		t.Errorf("p99 %v", p)
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("p50 of none")
	}
}

// readGlobView counts a glob's parts and rows from their Parquet footers,
// and the committed ones from the complete manifests only.
func TestReadGlobView(t *testing.T) {
	ctx := context.Background()
	b, err := store.OpenBucket(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	type row struct{ ID int64 }
	part := func(key string, rows int) int64 {
		var buf bytes.Buffer
		if err := parquet.Write(&buf, make([]row, rows)); err != nil {
			t.Fatal(err)
		}
		if err := b.WriteAll(ctx, key, buf.Bytes(), nil); err != nil {
			t.Fatal(err)
		}
		return int64(buf.Len())
	}
	put := func(key string, v any) {
		data, _ := json.Marshal(v)
		if err := b.WriteAll(ctx, key, data, nil); err != nil {
			t.Fatal(err)
		}
	}
	type file struct {
		Key   string `json:"key"`
		Rows  int64  `json:"rows"`
		Bytes int64  `json:"bytes"`
	}
	dir := "walks/kind=walks/graph=g/algorithm=deepwalk/"
	listed := part(dir+"batch=a/part-00000-aaaaaaaaaaaa.parquet", 3)
	part(dir+"batch=a/part-00000-bbbbbbbbbbbb.parquet", 2) // a losing attempt's
	put(dir+"batch=a/_SUCCESS", map[string]any{"batch_id": "a", "files": []file{{dir + "batch=a/part-00000-aaaaaaaaaaaa.parquet", 3, listed}}})
	part(dir+"batch=b/part-00000-cccccccccccc.parquet", 4) // killed, no manifest
	gone := dir + "batch=c/part-00000-dddddddddddd.parquet"
	put(dir+"batch=c/_SUCCESS", map[string]any{"batch_id": "c", "files": []file{{gone, 1, 100}}}) // incomplete
	part("walks/kind=visits/graph=g/algorithm=ppr/batch=v/part-00000-eeeeeeeeeeee.parquet", 5)

	objects := map[string]int64{}
	it := b.List(nil)
	for {
		o, err := it.Next(ctx)
		if err != nil {
			break
		}
		objects[o.Key] = o.Size
	}
	v, problems, err := readGlobView(ctx, b, objects, output.KindWalks)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.glob) != 3 || len(v.committed) != 1 || v.globRows != 9 || v.committedRows != 3 || len(problems) != 1 {
		t.Errorf("glob %v (%d rows), committed %v (%d rows), problems %v", v.glob, v.globRows, v.committed, v.committedRows, problems)
	}
}
