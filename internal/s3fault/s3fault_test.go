package s3fault

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/walkstage/walkstage/internal/testversity"
)

const bucket = "walks"

// gofakes3Target serves an in-memory gofakes3 with bucket "walks" and returns
// its URL.
func gofakes3Target(t *testing.T) string {
	t.Helper()
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	t.Cleanup(srv.Close)
	return srv.URL
}

func client(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		// The SDK's retries as they are, but without seconds of back-off.
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) { o.MaxBackoff = 20 * time.Millisecond }),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "walkstage", SecretAccessKey: "walkstage-secret"}, nil
		}),
	})
}

func listen(t *testing.T, target string, rules ...Rule) (*Server, *s3.Client) {
	t.Helper()
	s, err := Listen("127.0.0.1:0", Config{Target: target, Seed: 1, Rules: rules})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, client(s.URL)
}

func put(ctx context.Context, c *s3.Client, key, body string, create bool) error {
	in := &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte(body))}
	if create {
		in.IfNoneMatch = aws.String("*")
	}
	_, err := c.PutObject(ctx, in)
	return err
}

func get(ctx context.Context, c *s3.Client, key string) (string, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		return "", err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return string(b), err
}

func code(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// Each fault does what it says to the request it matches, and the SDK's
// retry sees what a real store's fault would show it.
func TestFaults(t *testing.T) {
	ctx := context.Background()
	succ := regexp.MustCompile(`_SUCCESS$`)
	for _, tc := range []struct {
		name  string
		rule  Rule
		check func(t *testing.T, c *s3.Client, direct *s3.Client)
	}{
		{"lost ack of a create: the retry finds the object", Rule{Op: OpPutObject, Key: succ, IfNoneMatch: true, Fault: LostAck, Times: 1},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, c, "d/_SUCCESS", "m", true); code(err) != "PreconditionFailed" {
					t.Fatalf("create after a lost ack: %v, want the retry's 412", err)
				}
				if got, err := get(ctx, direct, "d/_SUCCESS"); err != nil || got != "m" {
					t.Fatalf("store holds %q, %v", got, err)
				}
			}},
		{"lost ack answered 500: the retry overwrites", Rule{Op: OpPutObject, Fault: LostAckStatus, Times: 1},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, c, "d/part", "p", false); err != nil {
					t.Fatal(err)
				}
			}},
		{"503 SlowDown, retried", Rule{Op: OpPutObject, Fault: Status, Times: 2},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, c, "d/part", "p", false); err != nil {
					t.Fatal(err)
				}
			}},
		{"503 SlowDown past the retries", Rule{Op: OpPutObject, Fault: Status},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, c, "d/part", "p", false); code(err) != "SlowDown" {
					t.Fatalf("put: %v, want SlowDown", err)
				}
				if _, err := get(ctx, direct, "d/part"); code(err) != "NoSuchKey" {
					t.Fatalf("a refused put reached the store: %v", err)
				}
			}},
		{"reset before forwarding", Rule{Op: OpPutObject, Fault: Reset, Times: 1},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, c, "d/part", "p", true); err != nil {
					t.Fatalf("the retry after a reset: %v", err)
				}
			}},
		{"truncated body", Rule{Op: OpGetObject, Fault: Truncate},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, direct, "d/part", "0123456789", false); err != nil {
					t.Fatal(err)
				}
				if got, err := get(ctx, c, "d/part"); err == nil {
					t.Fatalf("read %q of a truncated answer without an error", got)
				}
			}},
		{"damaged body: the middle byte flipped, the rest as sent", Rule{Op: OpPutObject, Fault: Corrupt},
			func(t *testing.T, c, direct *s3.Client) {
				// gofakes3 checks neither the signed SHA-256 nor a
				// checksum header: it stores what arrives.
				if err := put(ctx, c, "d/part", "0123456789", false); err != nil {
					t.Fatal(err)
				}
				if got, err := get(ctx, direct, "d/part"); err != nil || got != "01234o6789" {
					t.Fatalf("store holds %q, %v; want the sixth byte flipped", got, err)
				}
			}},
		{"skip the first match", Rule{Op: OpPutObject, Fault: Status, Status: 500, Skip: 1},
			func(t *testing.T, c, direct *s3.Client) {
				if err := put(ctx, c, "d/1", "p", false); err != nil {
					t.Fatalf("skipped request: %v", err)
				}
				if err := put(ctx, c, "d/2", "p", false); code(err) != "InternalError" {
					t.Fatalf("second request: %v, want InternalError", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := gofakes3Target(t)
			s, c := listen(t, target, tc.rule)
			tc.check(t, c, client(target))
			if s.Injected(tc.rule.name()) == 0 {
				t.Fatalf("rule %q never fired: %v", tc.rule.name(), s.Stats())
			}
		})
	}
}

// Probability draws from the seeded stream: the same seed and requests
// fire the same faults.
func TestProbabilitySeeded(t *testing.T) {
	run := func() []bool {
		p, err := New(Config{Target: "http://127.0.0.1:1", Seed: 7, Rules: []Rule{{Op: OpGetObject, Fault: Status, Probability: 0.5}}})
		if err != nil {
			t.Fatal(err)
		}
		var fired []bool
		for range 64 {
			r := httptest.NewRequest(http.MethodGet, "/"+bucket+"/k", nil)
			_, ok := p.match(r, OpGetObject, "k")
			fired = append(fired, ok)
		}
		return fired
	}
	a, b := run(), run()
	n := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("request %d: fired %v then %v with the same seed", i, a[i], b[i])
		}
		if a[i] {
			n++
		}
	}
	if n == 0 || n == len(a) {
		t.Fatalf("fired %d of %d at probability 0.5", n, len(a))
	}
}

// A phantom answers as the killed versitygw did until what ends its kind.
func TestPhantom(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		kind         PhantomKind
		afterDelete  bool // a create succeeds after a DELETE
		afterOverPut bool // reads see a plain PUT
	}{
		{ClearedByPut, false, true},
		{ClearedByDelete, true, true},
		{Sticky, false, false},
	} {
		t.Run(map[PhantomKind]string{ClearedByPut: "cleared by put", ClearedByDelete: "cleared by delete", Sticky: "sticky"}[tc.kind], func(t *testing.T) {
			s, c := listen(t, gofakes3Target(t))
			s.Phantom(bucket, "d/_SUCCESS", tc.kind)
			if _, err := get(ctx, c, "d/_SUCCESS"); code(err) != "NoSuchKey" {
				t.Fatalf("get: %v, want NoSuchKey", err)
			}
			if _, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("d/_SUCCESS")}); err == nil {
				t.Fatal("head found a phantom")
			}
			if err := put(ctx, c, "d/_SUCCESS", "m", true); code(err) != "PreconditionFailed" {
				t.Fatalf("create: %v, want PreconditionFailed", err)
			}
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: aws.String("d/_SUCCESS")}); err != nil {
				t.Fatal(err)
			}
			err := put(ctx, c, "d/_SUCCESS", "m", true)
			if (err == nil) != tc.afterDelete {
				t.Fatalf("create after delete: %v", err)
			}
			if err != nil {
				if err := put(ctx, c, "d/_SUCCESS", "m", false); err != nil {
					t.Fatal(err)
				}
			}
			got, err := get(ctx, c, "d/_SUCCESS")
			if (err == nil && got == "m") != tc.afterOverPut {
				t.Fatalf("read after a plain put: %q, %v", got, err)
			}
		})
	}
}

// A put that the store dies landing leaves a phantom of its key.
func TestPhantomCreate(t *testing.T) {
	ctx := context.Background()
	s, c := listen(t, gofakes3Target(t), Rule{Op: OpPutObject, IfNoneMatch: true, Fault: PhantomCreate, Times: 1})
	if err := put(ctx, c, "d/_SUCCESS", "m", true); code(err) != "PreconditionFailed" {
		t.Fatalf("create: %v, want the retry's 412 from the phantom", err)
	}
	if !s.IsPhantom(bucket, "d/_SUCCESS") {
		t.Fatal("no phantom left")
	}
}

// In front of versitygw, signed requests still verify (the Host header is
// kept) and a lost acknowledgement reaches the store.
func TestVersityGW(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "walkstage")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "walkstage-secret")
	endpoint := testversity.Start(t)
	ctx := context.Background()
	if _, err := client(endpoint).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatal(err)
	}
	s, c := listen(t, endpoint, Rule{Op: OpPutObject, IfNoneMatch: true, Fault: LostAck, Times: 1})
	if err := put(ctx, c, "d/_SUCCESS", "m", true); code(err) != "PreconditionFailed" {
		t.Fatalf("create after a lost ack: %v, want the retry's 412", err)
	}
	if got, err := get(ctx, c, "d/_SUCCESS"); err != nil || got != "m" {
		t.Fatalf("through the proxy: %q, %v", got, err)
	}
	if s.Injected("PutObject lost-ack") != 1 {
		t.Fatalf("injected %v", s.Stats())
	}
}
