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

// unsignedPayloadParam is the s3:// URL parameter that stops the SDK from
// hashing request bodies for the signature on plain-HTTP endpoints.
//
// Over HTTPS the SDK already sends uploads as UNSIGNED-PAYLOAD (TLS guards
// the body). Over plain HTTP it signs the SHA-256 of every part and upload,
// and the store hashes it again to check: 15% of the GPU stage's CPU
// writing to a versitygw on the same host (profile of a backlog on the
// 16-core H100 host). For a store reached over a network the operator
// trusts (the same host or pod), unsigned_payload=true drops that hash;
// the manifest's CRC32C of each part still lets readers check the bytes.
// Off by default.
const unsignedPayloadParam = "unsigned_payload"

// takeUnsignedPayload removes the unsigned_payload parameter from q and
// reports its value.
func takeUnsignedPayload(q url.Values) (bool, error) {
	v := q.Get(unsignedPayloadParam)
	q.Del(unsignedPayloadParam)
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: %w", unsignedPayloadParam, v, err)
	}
	return on, nil
}

// idleConnsPerHost is how many idle connections the S3 client keeps to its
// endpoint. The SDK keeps 10; a stage has tens of batches uploading at
// once, so connections were closed as they went idle and dialled again
// for the next request: 4% of the GPU stage's CPU went to dialling
// versitygw (profile of a backlog on the 16-core host), and as much again
// to accepting on the store's side.
const idleConnsPerHost = 256

// reopenS3 reopens b, an S3 bucket opened from u by gocloud, with a copy of
// its client that keeps idleConnsPerHost idle connections and, when
// unsigned, sends bodies as UNSIGNED-PAYLOAD. b is closed.
func reopenS3(ctx context.Context, b *blob.Bucket, u *url.URL, unsigned bool) (*blob.Bucket, error) {
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
	if unsigned {
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
