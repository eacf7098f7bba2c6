package store

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"

	"github.com/walkstage/walkstage/internal/s3fault"
	"github.com/walkstage/walkstage/internal/testseaweed"
	"github.com/walkstage/walkstage/internal/testversity"
)

// uploadRequest is what TestS3UploadRequests looks at in each request that
// carries an object's bytes.
type uploadRequest struct {
	op       s3fault.Op
	payload  string // x-amz-content-sha256: UNSIGNED-PAYLOAD, or "sha256" for a hex digest
	expect   string // the Expect header
	checksum string // the x-amz-checksum-* header, "name=value"
}

// Every body goes to an S3-compatible store at a plain-HTTP endpoint as
// UNSIGNED-PAYLOAD with a CRC in a header (the CRC32C the caller kept, for
// a single PUT; the SDK's CRC32 of each multipart part), and without
// "Expect: 100-continue", unless the URL asks otherwise (its parameters
// give back the client before issue 36 too); the objects read back either
// way.
func TestS3UploadRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	small := make([]byte, 3<<20) // over the SDK's 2 MB threshold for Expect
	big := make([]byte, putThreshold+(6<<20))
	for _, d := range [][]byte{small, big} {
		for i := range d {
			d[i] = byte(rng.Uint32())
		}
	}
	smallCRC := "crc32c=" + CRC32CString(crc32.Checksum(small, castagnoli))
	for _, tc := range []struct {
		name, params string
		payload      string
		single, part string // the checksum header wanted: "crc32c=<sum>", "crc32", or none
		expect       string
	}{
		{"defaults", "", "UNSIGNED-PAYLOAD", smallCRC, "crc32", ""},
		{"signed", "&unsigned_payload=false", "sha256", "", "", ""},
		{"unsigned without checksums", "&request_checksum_calculation=when_required", "UNSIGNED-PAYLOAD", "", "", ""},
		{"signed with checksums", "&unsigned_payload=false&request_checksum_calculation=when_supported", "sha256", smallCRC, "crc32", ""},
		{"the client before issue 36", "&unsigned_payload=false&request_checksum_calculation=when_required&expect_continue=true",
			"sha256", "", "", "100-continue"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var seen []uploadRequest
			u := serveFakeS3(t, func(faker http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if op, _, _ := s3fault.Classify(r); op == s3fault.OpPutObject || op == s3fault.OpUploadPart {
						ur := uploadRequest{op: op, payload: r.Header.Get("X-Amz-Content-Sha256"), expect: r.Header.Get("Expect")}
						if len(ur.payload) == 64 {
							ur.payload = "sha256"
						}
						for k, v := range r.Header {
							if name, ok := strings.CutPrefix(strings.ToLower(k), "x-amz-checksum-"); ok && name != "type" && name != "algorithm" {
								ur.checksum = name + "=" + v[0]
							}
						}
						mu.Lock()
						seen = append(seen, ur)
						mu.Unlock()
					}
					faker.ServeHTTP(w, r)
				})
			})
			b := openS3(t, u+tc.params)
			ctx := context.Background()
			var bodies BodyPool
			for _, obj := range []struct {
				key  string
				data []byte
			}{{"single", small}, {"multipart", big}} {
				o, err := newPut(ctx, b, obj.key, blob.WriterOptions{ContentType: "application/octet-stream", BufferSize: 5 << 20}, &bodies)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := o.Write(obj.data); err != nil {
					t.Fatal(err)
				}
				if err := o.Close(); err != nil {
					t.Fatalf("%s: %v", obj.key, err)
				}
				got, err := b.ReadAll(ctx, obj.key)
				if err != nil || !bytes.Equal(got, obj.data) {
					t.Fatalf("%s: read back %d bytes (%v), equal %v", obj.key, len(got), err, bytes.Equal(got, obj.data))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var parts int
			for _, r := range seen {
				want := tc.single
				if r.op == s3fault.OpUploadPart {
					parts++
					want = tc.part
				}
				got := r.checksum
				if want == "crc32" {
					got, _, _ = strings.Cut(got, "=")
				}
				if r.payload != tc.payload || r.expect != tc.expect || got != want {
					t.Errorf("%s: payload %q, Expect %q, checksum %q; want payload %q, Expect %q, checksum %q", r.op, r.payload, r.expect, r.checksum, tc.payload, tc.expect, want)
				}
			}
			if len(seen) != parts+1 || parts < 2 {
				t.Fatalf("%d uploads seen, %d of them parts: want one PUT and the parts", len(seen), parts)
			}
		})
	}
	for _, bad := range []string{"&unsigned_payload=maybe", "&expect_continue=sometimes"} {
		if _, err := OpenBucket(context.Background(), fakeS3(t)+bad); err == nil || !strings.Contains(err.Error(), strings.Split(bad[1:], "=")[0]) {
			t.Errorf("%s: %v, want an error naming the parameter", bad, err)
		}
	}
}

// A body damaged on its way to the store (versitygw, SeaweedFS, each with
// its default settings) is refused, not stored, under the defaults and
// under either explicit payload setting: the SHA-256 of a signed payload,
// or the CRC header an unsigned one carries, is checked by the store. (An
// unsigned body without a checksum, the old unsigned_payload=true, was
// stored damaged.)
func TestS3DamagedBodyRefused(t *testing.T) {
	for _, server := range []struct {
		name  string
		start func(testing.TB) string
	}{{"versitygw", testversity.Start}, {"seaweedfs", testseaweed.Start}} {
		t.Run(server.name, func(t *testing.T) {
			s3Env(t)
			damagedBodies(t, server.start(t))
		})
	}
}

func damagedBodies(t *testing.T, endpoint string) {
	ctx := context.Background()
	admin := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "walkstage", SecretAccessKey: "walkstage-secret"}, nil
		})})
	if _, err := admin.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("walks")}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, putThreshold+(6<<20))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, params := range []string{"", "&unsigned_payload=true", "&unsigned_payload=false"} {
		for _, obj := range []struct {
			op   s3fault.Op
			size int
		}{{s3fault.OpPutObject, 1 << 20}, {s3fault.OpUploadPart, len(data)}} {
			t.Run(fmt.Sprintf("%s%s", obj.op, params), func(t *testing.T) {
				// Every try of the upload is damaged: what a store refuses,
				// the SDK may retry.
				proxy, err := s3fault.Listen("127.0.0.1:0", s3fault.Config{Target: endpoint, Seed: 1,
					Rules: []s3fault.Rule{{Op: obj.op, Fault: s3fault.Corrupt}}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { proxy.Close() })
				b := openS3(t, "s3://walks?"+url.Values{"endpoint": {proxy.URL}, "region": {"us-east-1"}, "use_path_style": {"true"}}.Encode()+params)
				key := fmt.Sprintf("damaged/%s%s", obj.op, params)
				var bodies BodyPool
				o, err := newPut(ctx, b, key, blob.WriterOptions{ContentType: "application/octet-stream", BufferSize: 5 << 20}, &bodies)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := o.Write(data[:obj.size]); err != nil {
					t.Fatal(err)
				}
				closeErr := o.Close()
				if proxy.Injected(string(obj.op)+" corrupt") == 0 {
					t.Fatalf("no %s damaged (%v)", obj.op, proxy.Stats())
				}
				got, err := b.ReadAll(ctx, key)
				if err == nil && !bytes.Equal(got, data[:obj.size]) {
					t.Fatalf("the store took the damaged body (close: %v)", closeErr)
				}
				if closeErr == nil {
					t.Fatalf("close succeeded with every %s damaged (read back: %v)", obj.op, err)
				}
			})
		}
	}
}
