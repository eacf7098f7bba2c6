package chaos

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// msg is one record the suite sends to the input topic.
type msg struct {
	id      string // the chaos-id header: ties dead-letter copies back to it
	key     []byte
	value   []byte
	headers []kgo.RecordHeader // besides the chaos-id header

	// accepted: a valid request (batchID says which); identical resends of
	// one are accepted too. Otherwise a bad message of a category.
	accepted bool
	batchID  string
	category string
	// reason is what docs/reference/messages.md leads us to expect; the suite asserts
	// it only for conflicts (issue 11: batch_id_conflict).
	reason string
	// either: a valid request the stage may run or refuse (an expensive
	// one, which admission control by cost may reject); answered either
	// way, never lost.
	either bool

	partition int32
	offset    int64     // -1 until produced
	produced  time.Time // the record's timestamp
	gen       int       // the input log's generation it went to (see topicReader)
	// lostWithLog: produced into a log the broker lost before the stage
	// answered it; not the stage's to answer (a copy was sent again).
	lostWithLog bool
}

// isBad is a message that must be dead-lettered.
func (m *msg) isBad() bool { return !m.accepted && !m.either }

// request is an accepted batch id with what its output must hold.
type request struct {
	batchID string
	body    map[string]any
	walks   int64 // seeds x walks_per_seed
	length  int
	msgs    []*msg
}

// gen makes the suite's messages from one seeded stream: the same seed
// gives the same messages in the same order.
type gen struct {
	rng      *rand.Rand
	vertices int // the graph's vertex ids are 0..vertices-1
	n        int // messages made
	reqs     []*request
	byBatch  map[string]*request
	// expensiveReqs are the either-way requests (not in reqs: they may be
	// refused).
	expensiveReqs []*request
	variant       int
}

func newGen(rng *rand.Rand, vertices int) *gen {
	return &gen{rng: rng, vertices: vertices, byBatch: map[string]*request{}}
}

func (g *gen) next(key, value []byte) *msg {
	g.n++
	return &msg{id: fmt.Sprintf("m-%05d", g.n), key: key, value: value, offset: -1}
}

// valid returns a new accepted request; one in twenty is heavy.
func (g *gen) valid() *msg { return g.request(g.rng.IntN(20) == 0) }

// heavy returns a new accepted request of about 10 MB of Parquet.
func (g *gen) heavy() *msg { return g.request(true) }

// huge returns a heavy request three times larger (~30 MB of Parquet,
// four upload parts): its multipart upload stays open long enough to be
// seen and killed.
func (g *gen) huge() *msg {
	m := g.request(true)
	req := g.byBatch[m.batchID]
	req.body["walks_per_seed"], req.body["length"] = 100, 300
	req.walks, req.length = int64(g.vertices*100), 300
	m.value = mustJSON(req.body)
	return m
}

func (g *gen) request(heavy bool) *msg {
	id := fmt.Sprintf("ok-%05d", len(g.reqs)+1)
	r := g.rng
	count := 50 + r.IntN(600)
	first := r.IntN(g.vertices - count)
	body := map[string]any{"version": 1, "batch_id": id, "seed_range": map[string]any{"first": first, "count": count}}
	length := 10 + r.IntN(90)
	wps := 1 + r.IntN(8)
	switch r.IntN(5) {
	case 0:
		body["algorithm"] = "deepwalk"
	case 1:
		body["algorithm"] = "deepwalk"
		body["weighted"] = true
	case 2:
		body["algorithm"] = "ppr"
		body["stop_probability"] = 0.05 + 0.3*r.Float64()
	case 3:
		body["algorithm"] = "node2vec"
		body["p"] = 0.25 + 4*r.Float64()
		body["q"] = 0.25 + 4*r.Float64()
		body["weighted"] = r.IntN(2) == 0
	case 4:
		body["algorithm"] = "metapath"
		body["schema"] = []int{r.IntN(3), r.IntN(3)}
		length = 4 + r.IntN(16)
	}
	if heavy { // ~10 MB of walks
		body = map[string]any{"version": 1, "batch_id": id, "algorithm": "deepwalk",
			"seed_range": map[string]any{"first": 0, "count": g.vertices}}
		// 1024 x 60 walks of 150-250 steps: 11-19 MB of Parquet (the
		// vertex dictionary keeps it small), more than one 8 MiB upload
		// part, so a kill can catch a multipart upload open.
		count, length, wps = g.vertices, 150+r.IntN(100), 60
	}
	body["length"] = length
	body["walks_per_seed"] = wps
	return g.add(id, body, count*wps, length, "valid")
}

// add makes an accepted request of body.
func (g *gen) add(id string, body map[string]any, walks, length int, category string) *msg {
	req := &request{batchID: id, body: body, walks: int64(walks), length: length}
	g.reqs = append(g.reqs, req)
	g.byBatch[id] = req
	m := g.next([]byte(id), mustJSON(body))
	m.accepted, m.batchID, m.category = true, id, category
	req.msgs = append(req.msgs, m)
	return m
}

// small is a new accepted request that takes the engine a few
// milliseconds: the suite measures its produce-to-event latency beside
// expensive ones.
func (g *gen) small() *msg {
	id := fmt.Sprintf("small-%05d", len(g.reqs)+1)
	body := map[string]any{"version": 1, "batch_id": id, "algorithm": "deepwalk",
		"seed_range": map[string]any{"first": g.rng.IntN(g.vertices - 20), "count": 20}, "length": 20, "walks_per_seed": 1}
	return g.add(id, body, 20, 20, "small")
}

// expensive is a valid Node2Vec request whose p makes nearly every
// candidate step a rejection (issue 32: 100 seeds x 10 walks x 1,000 steps
// held the engine 77 s), on seeds consecutive vertices with walksPerSeed
// walks of 1,000 steps each, well inside the default limits. The stage may
// run it or refuse it by cost; either way it is answered.
func (g *gen) expensive(seeds, walksPerSeed int) *msg {
	id := fmt.Sprintf("expensive-%05d", g.n+1)
	first := g.rng.IntN(g.vertices - seeds + 1)
	body := map[string]any{"version": 1, "batch_id": id, "algorithm": "node2vec", "p": 1e-6, "q": 1, "weighted": true,
		"seed_range": map[string]any{"first": first, "count": seeds}, "walks_per_seed": walksPerSeed, "length": 1000}
	req := &request{batchID: id, body: body, walks: int64(seeds * walksPerSeed), length: 1000}
	g.expensiveReqs = append(g.expensiveReqs, req)
	m := g.next([]byte(id), mustJSON(body))
	m.either, m.batchID, m.category = true, id, "expensive"
	req.msgs = append(req.msgs, m)
	return m
}

// withHeader is a malformed message carrying a header of size bytes
// (issue 32: its dead-letter stub kept the header, did not fit the
// dead-letter topic, and consumption stopped).
func (g *gen) withHeader(size int) *msg {
	id := fmt.Sprintf("bad-header-%05d", g.n+1)
	m := g.next([]byte(id), fmt.Appendf(nil, `{"version":1,"batch_id":"%s","algorithm":"deepwalk"`, id))
	m.headers = []kgo.RecordHeader{{Key: "chaos-padding", Value: bytes.Repeat([]byte("h"), size)}}
	m.category, m.reason = fmt.Sprintf("header-%dKiB", size>>10), "malformed"
	return m
}

// withKey is a malformed message whose key is size bytes (issue 32: the key
// became the rejected event's batch id, the event did not fit the
// completions topic, and publishing retried forever).
func (g *gen) withKey(size int) *msg {
	id := fmt.Sprintf("bad-key-%05d", g.n+1)
	key := append([]byte(id+"-"), bytes.Repeat([]byte("k"), size-len(id)-1)...)
	m := g.next(key, fmt.Appendf(nil, `{"version":1,"batch_id":"%s","algorithm":"deepwalk"`, id))
	m.category, m.reason = fmt.Sprintf("key-%dKiB", size>>10), "malformed"
	return m
}

// resend is a copy of m, under a new chaos id, for a message that was lost
// with the broker's log before the stage answered it.
func (g *gen) resend(m *msg) *msg {
	c := g.next(m.key, m.value)
	c.headers, c.accepted, c.either, c.batchID, c.category, c.reason = m.headers, m.accepted, m.either, m.batchID, m.category, m.reason
	if r := g.byBatch[m.batchID]; r != nil && m.accepted {
		r.msgs = append(r.msgs, c)
	}
	for _, r := range g.expensiveReqs {
		if r.batchID == m.batchID {
			r.msgs = append(r.msgs, c)
		}
	}
	return c
}

// duplicate resends an accepted request unchanged: a resubmission, not an
// error (same fingerprint), so it must not be dead-lettered.
func (g *gen) duplicate(req *request) *msg {
	m := g.next([]byte(req.batchID), mustJSON(req.body))
	m.accepted, m.batchID, m.category = true, req.batchID, "duplicate"
	req.msgs = append(req.msgs, m)
	return m
}

// conflict sends the batch id of an accepted request with other content.
func (g *gen) conflict(req *request) *msg {
	body := map[string]any{}
	for k, v := range req.body {
		body[k] = v
	}
	body["walks_per_seed"] = body["walks_per_seed"].(int) + 1
	m := g.next([]byte(req.batchID), mustJSON(body))
	m.category, m.reason = "conflicting-batch-id", "batch_id_conflict"
	return m
}

// large is a bad message of exactly size bytes: a request listing far more
// seeds than WALKSTAGE_MAX_SEEDS, and above 4 MiB also larger than
// WALKSTAGE_MAX_MESSAGE_BYTES; too_large either way.
func (g *gen) large(size int) *msg {
	id := fmt.Sprintf("bad-large-%d", g.n+1)
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":1,"batch_id":%q,"algorithm":"deepwalk","seeds":[`, id)
	for i := 0; b.Len() < size-24; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, i%g.vertices)
	}
	b.WriteString("]}")
	for b.Len() < size { // exactly size bytes: JSON allows trailing blanks
		b.WriteByte(' ')
	}
	m := g.next([]byte(id), b.Bytes())
	m.category, m.reason = fmt.Sprintf("large-%dMiB", size>>20), "too_large"
	return m
}

// badVariants are the small bad messages, each a function of a fresh batch
// id; bad() cycles through them so every variant appears.
var badVariants = []struct {
	category, reason string
	make             func(g *gen, id string) (key, value []byte)
}{
	{"invalid-json", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk"`)},
	{"invalid-json", "malformed", raw(`{"version":1,"batch_id":"%s",,"algorithm":"deepwalk","seeds":[1]}`)},
	{"invalid-json", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1,2,]}`)},
	{"invalid-json", "malformed", raw(`not json %s`)},
	{"invalid-json", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1]} {"version":1}`)},
	{"invalid-json", "malformed", func(g *gen, id string) ([]byte, []byte) { return []byte(id), nil }},
	{"invalid-json", "malformed", raw(`null`)},
	{"invalid-json", "malformed", raw(`[{"version":1,"batch_id":"%s"}]`)},
	{"wrong-type", "malformed", raw(`{"version":"1","batch_id":"%s","algorithm":"deepwalk","seeds":[1]}`)},
	{"wrong-type", "malformed", rawNoID(`{"version":1,"batch_id":17,"algorithm":"deepwalk","seeds":[1]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":3,"seeds":[1]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","length":"40","seeds":[1]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","walks_per_seed":2.5,"seeds":[1]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","weighted":"yes","seeds":[1]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":"1,2"}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1.5]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seed_range":[0,3]}`)},
	{"wrong-type", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1],"rng_seed":-1}`)},
	{"unknown-algorithm", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"randomwalk","seeds":[1]}`)},
	{"unknown-algorithm", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"node2vecc","seeds":[1]}`)},
	{"unknown-algorithm", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"","seeds":[1]}`)},
	{"unknown-algorithm", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","length":-1,"seeds":[1]}`)},
	{"out-of-range", "too_large", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","length":100000,"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","walks_per_seed":-3,"seeds":[1]}`)},
	{"out-of-range", "too_large", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","walks_per_seed":1000,"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"node2vec","p":0,"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"node2vec","q":1e9,"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"ppr","stop_probability":1.5,"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"ppr","stop_probability":0,"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"metapath","schema":[7],"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"metapath","schema":[],"seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seed_range":{"first":0,"count":0}}`)},
	{"out-of-range", "too_large", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seed_range":{"first":0,"count":200000}}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","sampler":"bogus","seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[]}`)},
	{"out-of-range", "unsupported_version", raw(`{"version":2,"batch_id":"%s","algorithm":"deepwalk","seeds":[1]}`)},
	{"out-of-range", "unsupported_version", raw(`{"batch_id":"%s","algorithm":"deepwalk","seeds":[1]}`)},
	{"out-of-range", "invalid_parameters", raw(`{"version":1,"batch_id":"%s","algorithm":"ppr","p":2,"seeds":[1]}`)},
	{"out-of-range", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","walk_len":40,"seeds":[1]}`)},
	{"out-of-range", "graph_mismatch", raw(`{"version":1,"batch_id":"%s","graph":"another-graph","algorithm":"deepwalk","seeds":[1]}`)},
	{"non-finite", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"node2vec","p":NaN,"seeds":[1]}`)},
	{"non-finite", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"node2vec","q":Infinity,"seeds":[1]}`)},
	{"non-finite", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"ppr","stop_probability":-Infinity,"seeds":[1]}`)},
	{"non-finite", "malformed", raw(`{"version":1,"batch_id":"%s","algorithm":"node2vec","p":1e999,"seeds":[1]}`)},
	{"batch-id", "invalid_batch_id", rawNoID(`{"version":1,"batch_id":"","algorithm":"deepwalk","seeds":[1]}`)},
	{"batch-id", "invalid_batch_id", rawNoID(`{"version":1,"algorithm":"deepwalk","seeds":[1]}`)},
	{"batch-id", "invalid_batch_id", func(g *gen, id string) ([]byte, []byte) { // no key, empty id
		return nil, []byte(`{"version":1,"batch_id":"","algorithm":"deepwalk","seeds":[1]}`)
	}},
	{"batch-id", "invalid_batch_id", rawNoID(`{"version":1,"batch_id":"a/b","algorithm":"deepwalk","seeds":[1]}`)},
	{"batch-id", "invalid_batch_id", rawNoID(`{"version":1,"batch_id":"..","algorithm":"deepwalk","seeds":[1]}`)},
	{"batch-id", "invalid_batch_id", rawNoID(`{"version":1,"batch_id":"has space","algorithm":"deepwalk","seeds":[1]}`)},
	{"batch-id", "invalid_batch_id", func(g *gen, id string) ([]byte, []byte) {
		return []byte(id), fmt.Appendf(nil, `{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1]}`, strings.Repeat("x", 200))
	}},
	{"batch-id", "invalid_batch_id", func(g *gen, id string) ([]byte, []byte) { // key and body disagree
		return []byte(id + "-key"), fmt.Appendf(nil, `{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1]}`, id)
	}},
	{"unknown-vertices", "unknown_vertices", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1099511627776]}`)},
	{"unknown-vertices", "unknown_vertices", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[0,1,99999999]}`)},
	{"unknown-vertices", "unknown_vertices", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seed_range":{"first":1099511627776,"count":3}}`)},
	{"unknown-vertices", "unknown_vertices", raw(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[-5]}`)},
	{"binary-garbage", "malformed", func(g *gen, id string) ([]byte, []byte) {
		b := make([]byte, 1+g.rng.IntN(4096))
		for i := range b {
			b[i] = byte(g.rng.UintN(256))
		}
		return []byte(id), b
	}},
	{"binary-garbage", "malformed", func(g *gen, id string) ([]byte, []byte) { // garbage key and value
		k := make([]byte, 1+g.rng.IntN(64))
		for i := range k {
			k[i] = byte(g.rng.UintN(256))
		}
		return k, append([]byte{0, 0, 0, 0, 1}, k...)
	}},
	{"non-utf8", "invalid_batch_id", func(g *gen, id string) ([]byte, []byte) {
		return []byte(id), fmt.Appendf(nil, "{\"version\":1,\"batch_id\":\"%s\xff\xfe\",\"algorithm\":\"deepwalk\",\"seeds\":[1]}", id)
	}},
	{"non-utf8", "invalid_parameters", func(g *gen, id string) ([]byte, []byte) {
		return []byte(id), fmt.Appendf(nil, "{\"version\":1,\"batch_id\":\"%s\",\"algorithm\":\"deep\xc3\x28walk\",\"seeds\":[1]}", id)
	}},
	{"non-utf8", "malformed", func(g *gen, id string) ([]byte, []byte) {
		return []byte(id), fmt.Appendf(nil, "\xef\xbb\xbf\xfe{\"version\":1,\"batch_id\":\"%s\",\"algorithm\":\"deepwalk\",\"seeds\":[1]}", id)
	}},
	{"non-utf8", "invalid_batch_id", func(g *gen, id string) ([]byte, []byte) { // UTF-16
		s := fmt.Sprintf(`{"version":1,"batch_id":"%s","algorithm":"deepwalk","seeds":[1]}`, id)
		b := []byte{0xff, 0xfe}
		for _, c := range []byte(s) {
			b = append(b, c, 0)
		}
		return []byte(id), b
	}},
}

func raw(format string) func(*gen, string) ([]byte, []byte) {
	return func(_ *gen, id string) ([]byte, []byte) {
		if !strings.Contains(format, "%s") {
			return []byte(id), []byte(format)
		}
		return []byte(id), fmt.Appendf(nil, format, id)
	}
}

// rawNoID is a body that carries no usable batch id; the key still does.
func rawNoID(body string) func(*gen, string) ([]byte, []byte) {
	return func(_ *gen, id string) ([]byte, []byte) { return []byte(id), []byte(body) }
}

// bad returns the next small bad message, cycling through badVariants.
func (g *gen) bad() *msg {
	v := badVariants[g.variant%len(badVariants)]
	g.variant++
	id := fmt.Sprintf("bad-%05d", g.n+1)
	k, val := v.make(g, id)
	m := g.next(k, val)
	m.category, m.reason = v.category, v.reason
	if v.category == "batch-id" && bytes.HasSuffix(k, []byte("-key")) {
		m.category = "batch-id-key-mismatch"
	}
	return m
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// shuffle mixes messages with the generator's stream.
func (g *gen) shuffle(ms []*msg) {
	g.rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
}
