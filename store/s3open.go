package store

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"
)

// unsignedPayloadParam is the s3:// URL parameter that says whether the
// SDK hashes request bodies for the signature on plain-HTTP endpoints.
//
// Over HTTPS the SDK already sends uploads as UNSIGNED-PAYLOAD (TLS guards
// the body). Over plain HTTP it signs the SHA-256 of every part and upload,
// and the store hashes it again to check: 15% of the GPU stage's CPU
// writing to a versitygw on the same host (profile of a backlog on the
// 16-core H100 host), and about a core of the store's at 1.8 GB/s. So bodies go
// unsigned by default, and over plain HTTP each carries a checksum header
// instead (see checksumDefault), which the store checks and the
// signature covers: a body damaged on the way is refused, as with TLS;
// what only the SHA-256 stops is a party on the network forging a body
// with the same CRC, for which the remedy is HTTPS (whose bodies the SDK
// never hashed). unsigned_payload=false signs them as the SDK does.
const unsignedPayloadParam = "unsigned_payload"

// expectContinueParam is the s3:// URL parameter that puts back the SDK's
// "Expect: 100-continue" on bodies over 2 MB (see noExpectContinue).
// Off by default.
const expectContinueParam = "expect_continue"

// s3Client is what the s3:// URL parameters of walkstage's own (not
// gocloud's) say about the client.
type s3Client struct {
	unsigned       bool // bodies as UNSIGNED-PAYLOAD
	expectContinue bool // the SDK's Expect: 100-continue
}

// takeS3Params removes walkstage's own parameters from q (gocloud refuses
// parameters it does not know) and returns what they say.
func takeS3Params(q url.Values) (s3Client, error) {
	c := s3Client{unsigned: true}
	for _, p := range []struct {
		name string
		v    *bool
	}{{unsignedPayloadParam, &c.unsigned}, {expectContinueParam, &c.expectContinue}} {
		v := q.Get(p.name)
		q.Del(p.name)
		if v == "" {
			continue
		}
		on, err := strconv.ParseBool(v)
		if err != nil {
			return c, fmt.Errorf("%s=%q: %w", p.name, v, err)
		}
		*p.v = on
	}
	return c, nil
}

// checksumDefault is request_checksum_calculation for an S3-compatible
// endpoint (q, the URL's query, names one) unless the URL sets it: when_supported,
// so that every upload body carries a CRC the store checks, where nothing
// else guards the bytes (unsigned bodies over plain HTTP); else
// when_required. Single PUTs send the CRC32C the sink keeps anyway
// (S3PutObject), multipart parts the CRC32 the SDK computes into a header
// over the part's buffer: both run on the CPU's CRC instructions (over
// 10 GB/s a core, against about 2 for SHA-256, the cost this replaces;
// Go has no such code for CRC64NVME). Over HTTPS the SDK would send the checksums as aws-chunked
// trailers, which S3-compatible stores commonly reject, and TLS already
// guards the bytes.
func checksumDefault(q url.Values, unsigned bool) string {
	ep := strings.ToLower(q.Get("endpoint"))
	plain := strings.HasPrefix(ep, "http://") || !strings.Contains(ep, "://") && q.Get("disable_https") == "true"
	if unsigned && plain {
		return "when_supported"
	}
	return "when_required"
}

// idleConnsPerHost is how many idle connections the S3 client keeps to its
// endpoint. The SDK keeps 10; a stage has tens of batches uploading at
// once, so connections were closed as they went idle and dialled again
// for the next request: 4% of the GPU stage's CPU went to dialling
// versitygw (profile of a backlog on the 16-core host), and as much again
// to accepting on the store's side.
const idleConnsPerHost = 256

// noExpectContinue turns off the SDK's "Expect: 100-continue" on bodies
// over 2 MB (ContinueHeaderThresholdBytes). With it every such PUT sends
// its headers, waits a round trip for the store's "100 Continue" and only
// then its body: the stage's objects (a 1,000-seed request is 2.4 MB) and
// every multipart part paid that wait and the extra writes and wake-ups at
// both ends. What the header saves, a body sent to a store that refuses
// the request, is a few MB at most, and a refusal (credentials, a missing
// bucket) is found at start-up (Check), not per object. expect_continue=true
// puts it back.
const noExpectContinue = -1

// reopenS3 reopens b, an S3 bucket opened from u by gocloud, with a copy of
// its client that keeps idleConnsPerHost idle connections and, as sc
// says, sends bodies as UNSIGNED-PAYLOAD and without "Expect:
// 100-continue". b is closed.
func reopenS3(ctx context.Context, b *blob.Bucket, u *url.URL, sc s3Client) (*blob.Bucket, error) {
	defer b.Close()
	var c *s3.Client
	if !b.As(&c) {
		return nil, errors.New("not an S3 bucket")
	}
	o := c.Options()
	if hc, ok := o.HTTPClient.(*awshttp.BuildableClient); ok {
		o.HTTPClient = hc.WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = idleConnsPerHost
			t.MaxIdleConns = max(t.MaxIdleConns, idleConnsPerHost)
		})
	}
	if !sc.expectContinue {
		o.ContinueHeaderThresholdBytes = noExpectContinue
	}
	if sc.unsigned {
		o.APIOptions = append(slices.Clip(o.APIOptions), unsignedPayload)
	}
	q := u.Query()
	opts := &s3blob.Options{KMSEncryptionID: q.Get("kmskeyid"), RequestChecksumCalculation: o.RequestChecksumCalculation}
	if sse := q.Get("ssetype"); sse != "" {
		// gocloud checked the value when it opened b.
		for _, t := range types.ServerSideEncryptionAes256.Values() {
			if strings.EqualFold(string(t), sse) {
				opts.EncryptionType = t
			}
		}
	}
	return s3blob.OpenBucket(ctx, s3.New(o), u.Host, opts)
}

// unsignedPayload marks each request's body hash UNSIGNED-PAYLOAD at the
// start of the finalize step, before the SDK's checksum middleware (which
// would otherwise hash the body for the signature while it computes its
// CRC) and its payload hash middleware (which keeps a hash already set).
func unsignedPayload(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("walkstage:UnsignedPayload",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			return next.HandleFinalize(v4.SetPayloadHash(ctx, "UNSIGNED-PAYLOAD"), in)
		}), middleware.Before)
}
