package message

import (
	"testing"
)

func TestFingerprintIgnoresSpellingNotContent(t *testing.T) {
	g := testGraph(t)
	dec := func(v string) *Request {
		t.Helper()
		r, err := DecodeRequest([]byte("b1"), []byte(v), g, DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a := dec(`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100,101],"length":10}`)
	b := dec(`{ "length" : 10, "seeds":[100, 101], "algorithm":"deepwalk","batch_id":"b1","version":1 }`)
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("same request, different fingerprints")
	}
	for _, v := range []string{
		`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[101,100],"length":10}`,
		`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100,101],"length":11}`,
		`{"version":1,"batch_id":"b1","algorithm":"ppr","seeds":[100,101],"length":10}`,
		`{"version":1,"batch_id":"b1","algorithm":"deepwalk","seeds":[100,101],"length":10,"rng_seed":7}`,
	} {
		if dec(v).Fingerprint() == a.Fingerprint() {
			t.Errorf("%s: same fingerprint as the original", v)
		}
	}
}
