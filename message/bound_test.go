package message

import (
	"strings"
	"testing"
)

func TestBoundID(t *testing.T) {
	for _, n := range []int{0, 1, MaxDerivedIDBytes, MaxDerivedIDBytes + 1, 600 << 10} {
		id := strings.Repeat("é", n/2) + strings.Repeat("x", n%2)
		got := BoundID(id)
		if len(got) > MaxDerivedIDBytes || (len(id) <= MaxDerivedIDBytes) != (got == id) {
			t.Errorf("BoundID of %d bytes: %d bytes %q", len(id), len(got), got)
		}
	}
	if BoundID(strings.Repeat("a", 300)) == BoundID(strings.Repeat("a", 299)+"b") {
		t.Error("two long keys with one prefix have one id")
	}
}
