package chaos

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/internal/s3fault"
)

// s3Rates are the S3 faults of a form: the proxy's rules, each named, in
// the order they are tried. Every rule fires on a share of the requests it
// matches (Probability) and at most Times times, so a run gets a known
// dose; the seed makes which requests they hit reproducible, as far as the
// stage's own order of requests is.
type s3Rates []s3fault.Rule

var (
	successKey = regexp.MustCompile(`/_SUCCESS$`)
	partKey    = regexp.MustCompile(`\.parquet$`)
)

// s3Rules lists every rule, at the short form's dose; scale multiplies
// each rule's Times for the full form.
func s3Rules(scale int) s3Rates {
	rules := s3Rates{
		// Lost acknowledgements on every kind of PUT: the store has done
		// it, the client hears nothing and sends it again.
		{Name: "success-lost-ack", Op: s3fault.OpPutObject, Key: successKey, IfNoneMatch: true, Fault: s3fault.LostAck, Probability: 0.1, Times: 3},
		{Name: "part-lost-ack", Op: s3fault.OpPutObject, Key: partKey, Fault: s3fault.LostAck, Probability: 0.05, Times: 3},
		{Name: "create-multipart-lost-ack", Op: s3fault.OpCreateMultipart, Fault: s3fault.LostAck, Probability: 0.3, Times: 1},
		{Name: "upload-part-lost-ack", Op: s3fault.OpUploadPart, Fault: s3fault.LostAck, Probability: 0.2, Times: 1},
		{Name: "complete-multipart-lost-ack", Op: s3fault.OpCompleteMulti, Fault: s3fault.LostAck, Probability: 0.3, Times: 1},
		// A put that landed but is answered 500.
		{Name: "put-landed-500", Op: s3fault.OpPutObject, Fault: s3fault.LostAckStatus, Status: 500, Probability: 0.03, Times: 2},
		// The manifest a store killed mid-put leaves: 404 to reads, 412
		// to creates, until a plain put (issue 32, versitygw v1.8.0).
		{Name: "success-phantom", Op: s3fault.OpPutObject, Key: successKey, IfNoneMatch: true, Fault: s3fault.PhantomCreate,
			Phantom: s3fault.ClearedByPut, Probability: 0.05, Times: 1},
		// Refusals, resets, cut answers and slow answers on any request.
		{Name: "slowdown-503", Fault: s3fault.Status, Status: 503, Probability: 0.02, Times: 5},
		{Name: "error-500", Fault: s3fault.Status, Status: 500, Probability: 0.01, Times: 3},
		{Name: "reset", Fault: s3fault.Reset, Probability: 0.01, Times: 3},
		{Name: "truncate", Fault: s3fault.Truncate, Probability: 0.01, Times: 3},
		{Name: "latency", Fault: s3fault.Delay, Latency: 700 * time.Millisecond, Probability: 0.02, Times: 10},
	}
	for i := range rules {
		rules[i].Times *= scale
	}
	return rules
}

var (
	shortS3 = s3Rules(1)
	fullS3  = s3Rules(10)
)

// s3Faults is the fault proxy between the stage and versitygw.
type s3Faults struct {
	addr  string
	srv   *s3fault.Server
	rules s3Rates
}

// startS3Faults puts a fault proxy in front of upstream (host:port) with
// the rules WALKSTAGE_CHAOS_S3 picks ("success-lost-ack,reset" only
// those, "-latency" all but that; empty: all).
func startS3Faults(t *testing.T, upstream string, rules s3Rates, seed uint64) *s3Faults {
	t.Helper()
	var names []string
	for _, r := range rules {
		names = append(names, r.Name)
	}
	pick, err := parseSet("WALKSTAGE_CHAOS_S3", os.Getenv("WALKSTAGE_CHAOS_S3"), names)
	if err != nil {
		t.Fatal(err)
	}
	var on s3Rates
	for _, r := range rules {
		if pick[r.Name] {
			on = append(on, r)
		}
	}
	srv, err := s3fault.Listen("127.0.0.1:0", s3fault.Config{Target: "http://" + upstream, Seed: seed, Rules: on})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	var desc []string
	for _, r := range on {
		desc = append(desc, fmt.Sprintf("%s (p %.2f, at most %d)", r.Name, r.Probability, r.Times))
	}
	t.Logf("s3 faults through %s: %s", srv.URL, strings.Join(desc, ", "))
	return &s3Faults{addr: strings.TrimPrefix(srv.URL, "http://"), srv: srv, rules: on}
}

// summary says how often each fault fired: "reset:2,success-lost-ack:1".
func (s *s3Faults) summary() string { return countBy(s.srv.Stats()) }
