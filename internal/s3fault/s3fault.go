// Package s3fault is a fault-injecting HTTP proxy for tests: it stands in
// front of a real S3 server (gofakes3 in-process, versitygw as a process)
// and, for the requests its rules match, loses acknowledgements, answers
// 500 or 503 SlowDown, resets connections, truncates answers, delays them
// or damages a request's body on its way to the store. It can also hold a key in the "phantom" state a killed versitygw
// left behind (see Phantom). Everything else is forwarded unchanged,
// the Host header included, so signed requests still verify.
//
// Requests must be path-style (http://host/bucket/key), as the tests'
// buckets are opened (use_path_style=true). Faults draw from a random
// stream seeded by Config.Seed, so a run is reproducible given the same
// order of requests. The package knows S3 requests, nothing of walkstage.
package s3fault

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Op is the S3 operation a request makes, by its API name.
type Op string

// The operations Classify tells apart.
const (
	OpPutObject       Op = "PutObject"
	OpGetObject       Op = "GetObject"
	OpHeadObject      Op = "HeadObject"
	OpDeleteObject    Op = "DeleteObject"
	OpCreateMultipart Op = "CreateMultipartUpload"
	OpUploadPart      Op = "UploadPart"
	OpCompleteMulti   Op = "CompleteMultipartUpload"
	OpAbortMultipart  Op = "AbortMultipartUpload"
	OpListMultipart   Op = "ListMultipartUploads"
	OpListObjects     Op = "ListObjects"
	OpBucket          Op = "Bucket" // any other request on a bucket (create, head, delete objects...)
)

// Classify names the operation of a path-style request, and its bucket
// and key ("" for a request on a bucket).
func Classify(r *http.Request) (op Op, bucket, key string) {
	bucket, key, _ = strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	if key == "" {
		if r.Method == http.MethodGet && q.Has("uploads") {
			return OpListMultipart, bucket, ""
		}
		if r.Method == http.MethodGet {
			return OpListObjects, bucket, ""
		}
		return OpBucket, bucket, ""
	}
	switch r.Method {
	case http.MethodPut:
		if q.Has("uploadId") {
			return OpUploadPart, bucket, key
		}
		return OpPutObject, bucket, key
	case http.MethodPost:
		if q.Has("uploads") {
			return OpCreateMultipart, bucket, key
		}
		if q.Has("uploadId") {
			return OpCompleteMulti, bucket, key
		}
	case http.MethodGet:
		return OpGetObject, bucket, key
	case http.MethodHead:
		return OpHeadObject, bucket, key
	case http.MethodDelete:
		if q.Has("uploadId") {
			return OpAbortMultipart, bucket, key
		}
		return OpDeleteObject, bucket, key
	}
	return OpBucket, bucket, key
}

// Fault is what a rule does to a request it matches.
type Fault int

const (
	// LostAck forwards the request, so the store acts on it, then closes
	// the connection without an answer: the client sees the connection
	// end and retries (the AWS SDK does) a request that already landed.
	LostAck Fault = iota + 1
	// LostAckStatus forwards the request, so the store acts on it, then
	// answers Rule.Status (default 500 InternalError) instead of the
	// store's answer.
	LostAckStatus
	// Status answers Rule.Status (default 503 SlowDown) without
	// forwarding.
	Status
	// Reset resets the connection (TCP RST) before forwarding: the store
	// never sees the request.
	Reset
	// Truncate forwards the request and sends the store's status and
	// headers but only the first half of its body (Content-Length still
	// announces all of it), then closes the connection.
	Truncate
	// Delay waits Rule.Latency (or until the client gives up), then
	// forwards.
	Delay
	// PhantomCreate emulates a store killed while it lands a put: the
	// request is not forwarded, the connection resets, and the key is left
	// a phantom of kind Rule.Phantom (see Phantom).
	PhantomCreate
	// Corrupt forwards the request with the middle byte of its body
	// flipped, headers unchanged, as a faulty link or NIC would: whether
	// the store takes the damaged bytes is up to what the request carries
	// to check them (a signed SHA-256, a checksum header).
	Corrupt
)

func (f Fault) String() string {
	switch f {
	case LostAck:
		return "lost-ack"
	case LostAckStatus:
		return "lost-ack-status"
	case Status:
		return "status"
	case Reset:
		return "reset"
	case Truncate:
		return "truncate"
	case Delay:
		return "delay"
	case PhantomCreate:
		return "phantom-create"
	case Corrupt:
		return "corrupt"
	}
	return fmt.Sprintf("fault(%d)", int(f))
}

// Rule injects Fault into the requests it matches. A request is matched by
// the first rule, in order, whose every set field holds and that still
// fires; the others are forwarded as they are.
type Rule struct {
	// Name keys the rule's counter (Proxy.Injected); defaults to
	// "<op> <fault>".
	Name string
	// Op, when set, is the operation to match (Classify).
	Op Op
	// Key, when set, must match the object key (without the bucket).
	Key *regexp.Regexp
	// IfNoneMatch limits the rule to create-if-absent requests (an
	// If-None-Match header).
	IfNoneMatch bool
	Fault       Fault
	// Status is the answer of Status and LostAckStatus faults.
	Status int
	// Latency is the wait of a Delay fault.
	Latency time.Duration
	// Phantom is the kind of phantom a PhantomCreate leaves (default
	// ClearedByPut, what versitygw does).
	Phantom PhantomKind
	// Skip lets the first Skip matching requests through unharmed.
	Skip int
	// Times bounds how often the rule fires; 0 is without bound.
	Times int
	// Probability, between 0 and 1, fires the rule on that share of the
	// matching requests, drawn from the proxy's seeded stream; 0 is always.
	Probability float64
}

func (r *Rule) name() string {
	if r.Name != "" {
		return r.Name
	}
	op := string(r.Op)
	if op == "" {
		op = "any"
	}
	return op + " " + r.Fault.String()
}

// PhantomKind says what ends a phantom key.
type PhantomKind int

const (
	// ClearedByPut: a DELETE is answered 204 and changes nothing; a plain
	// (unconditional) PUT of the key ends the phantom. This is versitygw's
	// POSIX backend with sidecar metadata (v1.8.0, as the chaos suite runs
	// it) after a SIGKILL between storing a put's metadata and linking its
	// data: the sidecar's etag makes every If-None-Match: * create 412
	// while HEAD and GET stat the missing data file and answer 404; its
	// DeleteObject returns early when that file is missing, leaving the
	// metadata, and a plain put rewrites both. Checked against the binary.
	ClearedByPut PhantomKind = iota
	// ClearedByDelete: a DELETE ends the phantom (as would a store whose
	// delete removes the stale metadata), and so does a plain PUT.
	ClearedByDelete
	// Sticky: nothing ends it: reads answer 404 and creates 412 for good,
	// whatever is written (a store that lost the key's data for good).
	Sticky
)

// Config configures a Proxy.
type Config struct {
	// Target is the store's base URL, e.g. "http://127.0.0.1:7070".
	Target string
	// Seed seeds the stream Rule.Probability draws from.
	Seed  uint64
	Rules []Rule
}

// Proxy forwards S3 requests to a store, injecting faults. It is an
// http.Handler; Listen serves one on a port of its own.
type Proxy struct {
	target *url.URL
	client *http.Client

	mu       sync.Mutex
	rules    []Rule
	seen     []int // matching requests per rule (for Skip)
	fired    []int // faults injected per rule (for Times)
	injected map[string]int
	rng      *rand.Rand
	phantoms map[string]PhantomKind // "bucket/key"
}

// New returns a proxy in front of cfg.Target.
func New(cfg Config) (*Proxy, error) {
	u, err := url.Parse(cfg.Target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("s3fault: target %q is not a base URL like http://host:port", cfg.Target)
	}
	p := &Proxy{
		target: u,
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil,
			DisableCompression:  true, // pass Accept-Encoding and bodies through as they are
			MaxIdleConnsPerHost: 64,
		}},
		injected: map[string]int{},
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x5333)),
		phantoms: map[string]PhantomKind{},
	}
	if err := p.SetRules(cfg.Rules...); err != nil {
		return nil, err
	}
	return p, nil
}

// SetRules replaces the rules (their Skip and Times counts start again);
// none forwards every request.
func (p *Proxy) SetRules(rules ...Rule) error {
	for i, r := range rules {
		if r.Fault < LostAck || r.Fault > Corrupt {
			return fmt.Errorf("s3fault: rule %d (%s): unknown fault %d", i, r.name(), int(r.Fault))
		}
		if r.Probability < 0 || r.Probability > 1 || r.Skip < 0 || r.Times < 0 {
			return fmt.Errorf("s3fault: rule %d (%s): probability %v, skip %d, times %d out of range", i, r.name(), r.Probability, r.Skip, r.Times)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append([]Rule(nil), rules...)
	p.seen = make([]int, len(rules))
	p.fired = make([]int, len(rules))
	return nil
}

// Injected is how often the named rule has fired since the proxy started
// (Rule.Name, or its default); "phantom" counts the answers a phantom key
// got.
func (p *Proxy) Injected(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.injected[name]
}

// Stats copies every counter of Injected.
func (p *Proxy) Stats() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.injected))
	for k, v := range p.injected {
		out[k] = v
	}
	return out
}

// Phantom puts key of bucket in the state a killed versitygw left a
// manifest in (issue 32): HEAD and GET answer 404 NoSuchKey, a create
// with If-None-Match answers 412 PreconditionFailed without reaching the
// store, and kind says what ends it. The store itself is not touched.
func (p *Proxy) Phantom(bucket, key string, kind PhantomKind) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phantoms[bucket+"/"+key] = kind
}

// IsPhantom says whether key of bucket is still a phantom.
func (p *Proxy) IsPhantom(bucket, key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.phantoms[bucket+"/"+key]
	return ok
}

// match returns the rule that fires for r, if any, and counts it.
func (p *Proxy) match(r *http.Request, op Op, key string) (Rule, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.rules {
		rule := &p.rules[i]
		if rule.Op != "" && rule.Op != op ||
			rule.Key != nil && (key == "" || !rule.Key.MatchString(key)) ||
			rule.IfNoneMatch && r.Header.Get("If-None-Match") == "" {
			continue
		}
		p.seen[i]++
		if p.seen[i] <= rule.Skip || rule.Times > 0 && p.fired[i] >= rule.Times {
			continue
		}
		if rule.Probability > 0 && p.rng.Float64() >= rule.Probability {
			continue
		}
		p.fired[i]++
		p.injected[rule.name()]++
		return *rule, true
	}
	return Rule{}, false
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op, bucket, key := Classify(r)
	if p.servePhantom(w, r, op, bucket, key) {
		return
	}
	rule, ok := p.match(r, op, key)
	if !ok {
		p.forwardTo(w, r)
		return
	}
	switch rule.Fault {
	case LostAck:
		if resp, err := p.forward(r); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		panic(http.ErrAbortHandler) // the server closes the connection, no answer
	case LostAckStatus:
		if resp, err := p.forward(r); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		writeError(w, r, statusOr(rule.Status, http.StatusInternalServerError))
	case Status:
		io.Copy(io.Discard, r.Body)
		writeError(w, r, statusOr(rule.Status, http.StatusServiceUnavailable))
	case Reset:
		reset(w)
	case Truncate:
		resp, err := p.forward(r)
		if err != nil {
			writeError(w, r, http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		copyHeader(w.Header(), resp.Header)
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		w.WriteHeader(resp.StatusCode)
		w.Write(body[:len(body)/2])
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	case Delay:
		t := time.NewTimer(rule.Latency)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
		p.forwardTo(w, r)
	case PhantomCreate:
		io.Copy(io.Discard, r.Body)
		p.Phantom(bucket, key, rule.Phantom)
		reset(w)
	case Corrupt:
		body, err := io.ReadAll(r.Body)
		if err != nil {
			panic(http.ErrAbortHandler)
		}
		if len(body) > 0 {
			body[len(body)/2] ^= 0x5a
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p.forwardTo(w, r)
	}
}

// servePhantom answers a request on a phantom key the way the store in
// that state does; false lets the request through (a plain write, or a
// delete, which may end the phantom).
func (p *Proxy) servePhantom(w http.ResponseWriter, r *http.Request, op Op, bucket, key string) bool {
	if key == "" {
		return false
	}
	id := bucket + "/" + key
	p.mu.Lock()
	kind, ok := p.phantoms[id]
	if ok {
		p.injected["phantom"]++
	}
	p.mu.Unlock()
	if !ok {
		return false
	}
	switch {
	case op == OpGetObject || op == OpHeadObject:
		io.Copy(io.Discard, r.Body)
		writeError(w, r, http.StatusNotFound)
		return true
	case (op == OpPutObject || op == OpCompleteMulti) && r.Header.Get("If-None-Match") != "":
		io.Copy(io.Discard, r.Body)
		writeError(w, r, http.StatusPreconditionFailed)
		return true
	case op == OpDeleteObject && kind != ClearedByDelete:
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
		return true
	case op == OpDeleteObject || op == OpPutObject || op == OpCompleteMulti:
		rec := &statusRecorder{ResponseWriter: w}
		p.forwardTo(rec, r)
		if kind != Sticky && rec.status/100 == 2 {
			p.mu.Lock()
			delete(p.phantoms, id)
			p.mu.Unlock()
		}
		return true
	}
	return false
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func statusOr(s, def int) int {
	if s == 0 {
		return def
	}
	return s
}

// hopHeaders are not forwarded (RFC 9110 7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends r to the store as it came: same method, path, query,
// headers and Host (signatures cover it), body streamed.
func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	u := *p.target
	u.Path = strings.TrimSuffix(p.target.Path, "/") + r.URL.Path
	u.RawPath = ""
	if r.URL.RawPath != "" {
		u.RawPath = strings.TrimSuffix(p.target.EscapedPath(), "/") + r.URL.RawPath
	}
	u.RawQuery = r.URL.RawQuery
	// The request's own context: a client that gives up cancels the
	// forward, as it would cut its connection to the store.
	out, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), r.Body)
	if err != nil {
		return nil, err
	}
	if r.ContentLength == 0 {
		out.Body = nil
	}
	out.ContentLength = r.ContentLength
	copyHeader(out.Header, r.Header)
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	out.Host = r.Host
	return p.client.Do(out)
}

func (p *Proxy) forwardTo(w http.ResponseWriter, r *http.Request) {
	resp, err := p.forward(r)
	if err != nil {
		if r.Context().Err() != nil {
			return
		}
		writeError(w, r, http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	copyHeader(w.Header(), resp.Header)
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}

// reset ends the connection with a TCP RST, as a store that died does.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// s3Codes are the S3 error codes of the statuses the proxy answers itself.
var s3Codes = map[int]string{
	http.StatusNotFound:            "NoSuchKey",
	http.StatusPreconditionFailed:  "PreconditionFailed",
	http.StatusInternalServerError: "InternalError",
	http.StatusBadGateway:          "BadGateway",
	http.StatusServiceUnavailable:  "SlowDown",
}

// writeError answers an S3 error document (no body to a HEAD).
func writeError(w http.ResponseWriter, r *http.Request, status int) {
	code := s3Codes[status]
	if code == "" {
		code = strings.ReplaceAll(http.StatusText(status), " ", "")
	}
	var buf bytes.Buffer
	fmt.Fprintf(&buf, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected by s3fault</Message><Resource>%s</Resource><RequestId>s3fault</RequestId></Error>`, code, r.URL.Path)
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", fmt.Sprint(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		w.Write(buf.Bytes())
	}
}

// Server is a Proxy listening on a port of its own.
type Server struct {
	*Proxy
	// URL is the proxy's base URL, to use as the store's endpoint.
	URL string
	srv *http.Server
	ln  net.Listener
}

// Listen serves a proxy configured by cfg on addr ("127.0.0.1:0" picks a
// free port) until Close.
func Listen(addr string, cfg Config) (*Server, error) {
	p, err := New(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("s3fault: listen on %s: %w", addr, err)
	}
	s := &Server{Proxy: p, URL: "http://" + ln.Addr().String(), ln: ln,
		srv: &http.Server{Handler: p, ReadHeaderTimeout: time.Minute, ErrorLog: nil}}
	go s.srv.Serve(ln)
	return s, nil
}

// Close stops the server and the requests in flight.
func (s *Server) Close() error {
	err := s.srv.Close()
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Shutdown stops accepting requests and waits for those in flight until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }
