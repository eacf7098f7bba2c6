package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
)

// recordingS3 serves gofakes3 and records each request as "METHOD key?query"
// with the bucket's path stripped, followed by its checksum headers.
func recordingS3(t *testing.T) (bucketURL string, requests func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	u := serveFakeS3(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+strings.TrimPrefix(r.URL.Path, "/walks/")+"?"+r.URL.RawQuery+
				" crc32c="+r.Header.Get("X-Amz-Checksum-Crc32c")+" trailer="+r.Header.Get("X-Amz-Trailer")+" encoding="+r.Header.Get("Content-Encoding"))
			mu.Unlock()
			faker.ServeHTTP(w, r)
		})
	})
	return u, func() []string {
		mu.Lock()
		defer mu.Unlock()
		out := seen
		seen = nil
		return out
	}
}

// Objects up to putThreshold go to S3 as one PutObject from the writer's
// own pooled buffer; a larger one switches to gocloud's multipart upload
// part-way. Both read back byte for byte, with gocloud's content type, and
// the caller's BeforeWrite hook sees the request's bucket and key. A single
// PUT carries the body's CRC32C in a header (not an aws-chunked trailer)
// under the default for a plain-HTTP endpoint (when_supported), and no
// checksum under when_required.
func TestS3PutObject(t *testing.T) {
	for _, calc := range []string{"", "when_required"} {
		t.Run("checksums="+calc, func(t *testing.T) { s3PutObjects(t, calc) })
	}
}

func s3PutObjects(t *testing.T, calc string) {
	u, requests := recordingS3(t)
	if calc != "" {
		u += "&request_checksum_calculation=" + calc
	}
	b := openS3(t, u)
	ctx := context.Background()
	var bodies BodyPool
	requests()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1000, 3 << 20, putThreshold, putThreshold + 1, 40 << 20} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		key := fmt.Sprintf("put/%d", size)
		var target S3Target
		o, err := newPut(ctx, b, key, blob.WriterOptions{ContentType: "application/vnd.apache.parquet", BufferSize: 5 << 20, BeforeWrite: target.BeforeWrite}, &bodies)
		if err != nil {
			t.Fatal(err)
		}
		if target.key != key || target.bucket != "walks" {
			t.Fatalf("size %d: BeforeWrite saw bucket %q key %q", size, target.bucket, target.key)
		}
		// In pieces of uneven size, as a part's writes come.
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 1+rng.IntN(3<<20))
			if _, err := o.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := o.Close(); err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		var puts, posts int
		for _, r := range requests() {
			switch {
			case strings.HasPrefix(r, "PUT "+key+"?") && !strings.Contains(r, "uploadId"):
				puts++
				want := "crc32c= trailer= encoding="
				if calc == "" {
					want = "crc32c=" + CRC32CString(crc32.Checksum(data, castagnoli)) + " trailer= encoding="
				}
				if !strings.HasSuffix(r, want) {
					t.Fatalf("size %d: %s, want it to end %q", size, r, want)
				}
			case strings.HasPrefix(r, "POST "+key+"?"):
				posts++
			}
		}
		if single := size <= putThreshold; single && (puts != 1 || posts != 0) || !single && posts == 0 {
			t.Fatalf("size %d: %d single PUTs, %d POSTs (multipart create and complete)", size, puts, posts)
		}
		got, err := b.ReadAll(ctx, key)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("size %d: read back %d bytes (%v), equal %v", size, len(got), err, bytes.Equal(got, data))
		}
		attrs, err := b.Attributes(ctx, key)
		if err != nil || attrs.ContentType != "application/vnd.apache.parquet" {
			t.Fatalf("size %d: attributes %+v, %v", size, attrs, err)
		}
	}
}

// An aborted object is never sent.
func TestS3PutObjectAbort(t *testing.T) {
	u, requests := recordingS3(t)
	b := openS3(t, u)
	ctx := context.Background()
	requests()
	o, err := newPut(ctx, b, "put/aborted", blob.WriterOptions{ContentType: "application/vnd.apache.parquet"}, new(BodyPool))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	o.Abort()
	if r := requests(); len(r) != 0 {
		t.Fatalf("an aborted object sent %v", r)
	}
	if ok, err := b.Exists(ctx, "put/aborted"); ok || err != nil {
		t.Fatalf("aborted object exists: %v, %v", ok, err)
	}
}

// Bytes given with WriteHeld go out as they are at Close, not copied when
// written: a held slice changed before Close shows in the object (which
// the caller must never do; here it shows no copy was made), a written one
// does not. A slice that would take the object past putThreshold is
// written (copied), and the object switches to the multipart upload with
// everything in order, the bytes held so far copied at the switch. A PUT the store fails once is sent again from the
// start (the SDK seeks the body back): the object still reads back whole.
func TestS3PutObjectHeldBytes(t *testing.T) {
	var mu sync.Mutex
	failed := map[string]bool{}
	u := serveFakeS3(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			first := r.Method == http.MethodPut && !failed[r.URL.Path] && strings.Contains(r.URL.Path, "retry")
			failed[r.URL.Path] = true
			mu.Unlock()
			if first {
				_, _ = io.Copy(io.Discard, r.Body)
				http.Error(w, "<Error><Code>InternalError</Code></Error>", http.StatusInternalServerError)
				return
			}
			faker.ServeHTTP(w, r)
		})
	})
	b := openS3(t, u)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []byte {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		return p
	}
	for _, tc := range []struct {
		key    string
		pieces []int // sizes; odd-numbered pieces are held
	}{
		{"held/small", []int{4, 1 << 20, 100, 3 << 20, 8}},
		{"held/retry", []int{4, 2 << 20, 100, 1 << 20}},
		{"held/big", []int{4, 10 << 20, 100, 10 << 20, 8, 5 << 20}},
	} {
		o, err := newPut(ctx, b, tc.key, blob.WriterOptions{ContentType: "application/vnd.apache.parquet", BufferSize: 5 << 20}, new(BodyPool))
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		var heldSlices [][]byte
		total := 0
		for i, n := range tc.pieces {
			p := random(n)
			if i%2 == 0 {
				if _, err := o.Write(p); err != nil {
					t.Fatal(err)
				}
				want = append(want, p...)
				p[0] ^= 0xff // a written slice is the writer's again
			} else {
				_, held, err := o.WriteHeld(p)
				if err != nil {
					t.Fatal(err)
				}
				if fits := total+n <= putThreshold; held != fits {
					t.Fatalf("%s: piece %d held %v, fits the single request %v", tc.key, i, held, fits)
				}
				want = append(want, p...)
				if held {
					heldSlices = append(heldSlices, p)
				}
			}
			total += n
		}
		// Changed after being held, before Close: a single request sends
		// the change; an object that switched to the multipart upload
		// copied its held bytes at the switch, so it does not.
		single := total <= putThreshold
		for _, p := range heldSlices {
			p[len(p)-1] ^= 0x5a
		}
		if single {
			at := 0
			for i, n := range tc.pieces {
				if i%2 == 1 {
					want[at+n-1] ^= 0x5a
				}
				at += n
			}
		}
		if err := o.Close(); err != nil {
			t.Fatalf("%s: %v", tc.key, err)
		}
		got, err := b.ReadAll(ctx, tc.key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes (%v), want %d, equal %v", tc.key, len(got), err, len(want), bytes.Equal(got, want))
		}
	}
	if !failed["/walks/held/retry"] {
		t.Fatal("the retried PUT never came")
	}
}

// newPut starts key in b, an S3 bucket, as the sink starts a part.
func newPut(ctx context.Context, b *blob.Bucket, key string, opts blob.WriterOptions, bodies *BodyPool) (*S3PutObject, error) {
	var c *s3.Client
	if !b.As(&c) {
		return nil, errors.New("not an S3 bucket")
	}
	return NewS3PutObject(ctx, b, c, key, opts, bodies)
}
