package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/fakes3"
	"github.com/walkstage/walkstage/store"
)

// The plain upload is the ceiling the stage's S3 rate is held to, so its
// objects go as the stage's parts go (sink: store.S3PutObject): one PUT
// whose body is the object as it is, with its CRC32C in a header. Through
// gocloud's writer the SDK sent each body aws-chunked with a CRC32
// header, a different request for the store to serve, which Via "gocloud"
// still sends.
func TestPlainUploadSendsTheSinksRequests(t *testing.T) {
	for _, tc := range []struct{ via, checksum string }{
		{"", "crc32c"}, {PlainViaSink, "crc32c"}, {PlainViaGocloud, "crc32"},
	} {
		t.Run("via="+tc.via, func(t *testing.T) { plainRequests(t, tc.via, tc.checksum) })
	}
}

func plainRequests(t *testing.T, via, checksum string) {
	var mu sync.Mutex
	var puts []string
	u := fakes3.Serve(t, func(faker http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				mu.Lock()
				puts = append(puts, r.URL.Path+"?"+r.URL.RawQuery+" length="+strconv.FormatInt(r.ContentLength, 10)+
					" crc32c="+strconv.FormatBool(r.Header.Get("X-Amz-Checksum-Crc32c") != "")+
					" crc32="+strconv.FormatBool(r.Header.Get("X-Amz-Checksum-Crc32") != "")+
					" trailer="+r.Header.Get("X-Amz-Trailer")+" encoding="+r.Header.Get("Content-Encoding"))
				mu.Unlock()
			}
			faker.ServeHTTP(w, r)
		})
	})
	const object = 1<<20 + 3
	p := PlainUpload{BucketURL: u, Prefix: "p", Bytes: 3*object - 10, ObjectBytes: object, Parallel: 2, Via: via}
	r, err := p.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Objects != 3 || r.Bytes != p.Bytes {
		t.Fatalf("%d objects, %d bytes; want 3, %d", r.Objects, r.Bytes, p.Bytes)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(puts) != 3 {
		t.Fatalf("%d PUTs, want 3: %q", len(puts), puts)
	}
	for _, put := range puts {
		if !strings.HasPrefix(put, "/walks/p/plain-0000") || strings.Contains(put, "uploadId") ||
			!strings.HasSuffix(put, fmt.Sprintf(" crc32c=%v crc32=%v trailer= encoding=", checksum == "crc32c", checksum == "crc32")) ||
			!strings.Contains(put, " length="+strconv.Itoa(object)+" ") && !strings.Contains(put, " length="+strconv.Itoa(object-10)+" ") {
			t.Errorf("%s: want one PUT of the object's bytes as they are, its %s in a header", put, checksum)
		}
	}
}

// A plain upload removes its objects after the measurement unless asked to
// keep them (stage-load.sh keeps them, so that the store's CPU it counts
// around the upload holds no deletes, then removes them with Delete).
func TestPlainUploadKeep(t *testing.T) {
	for _, keep := range []bool{false, true} {
		t.Run("keep="+strconv.FormatBool(keep), func(t *testing.T) {
			u := fakes3.Serve(t, nil)
			p := PlainUpload{BucketURL: u, Prefix: "p", Bytes: 5000, ObjectBytes: 1000, Parallel: 2, Keep: keep}
			if _, err := p.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			b, err := store.OpenBucket(context.Background(), u)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			n := 0
			for it := b.List(&blob.ListOptions{Prefix: "p/"}); ; n++ {
				if _, err := it.Next(context.Background()); err == io.EOF {
					break
				} else if err != nil {
					t.Fatal(err)
				}
			}
			if want := map[bool]int{false: 0, true: 5}[keep]; n != want {
				t.Errorf("%d objects left, want %d", n, want)
			}
			// Delete removes what a kept upload left, and only that.
			if err := b.WriteAll(context.Background(), "p-other/x", []byte("x"), nil); err != nil {
				t.Fatal(err)
			}
			if d, err := p.Delete(context.Background()); err != nil || d != n {
				t.Errorf("Delete: %d objects, %v; want %d", d, err, n)
			}
			if ok, err := b.Exists(context.Background(), "p-other/x"); !ok || err != nil {
				t.Errorf("Delete removed an object outside the prefix: %v", err)
			}
		})
	}
}
