package chaos

import (
	"testing"
)

// s3Rates are the S3 faults the proxy makes, as fractions of requests.
type s3Rates struct{}

var (
	shortS3 = s3Rates{}
	fullS3  = s3Rates{}
)

// s3Faults is the fault proxy between the stage and versitygw.
type s3Faults struct {
	addr string
}

func startS3Faults(t *testing.T, upstream string, r s3Rates, seed uint64) *s3Faults {
	t.Logf("s3 faults: the proxy (internal/s3fault) is not merged yet; the stage talks to versitygw directly")
	return &s3Faults{addr: upstream}
}

func (s *s3Faults) summary() string { return "none" }
