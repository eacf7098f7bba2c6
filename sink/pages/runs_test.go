package pages

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// Frames of runs decode, with zstd's own decoder, to the values written,
// whatever the runs: none, short and long ones, runs across blocks, a
// single value, values whose bytes take any symbol, most match length
// codes in one block, and sizes around the block size; and they are smaller than zstd's fastest level makes them,
// or close, where the values come in runs.
func TestRunsFrameDecodes(t *testing.T) {
	pc, err := newPageCodec(Zstd, zstd.SpeedFastest)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	r := rand.New(rand.NewPCG(7, 8))
	values := func(n, maxRun int, bitsWide uint) []byte {
		var b []byte
		for len(b) < 8*n {
			v := r.Uint64() >> (64 - bitsWide)
			for range 1 + r.IntN(maxRun) {
				if len(b) < 8*n {
					b = binary.LittleEndian.AppendUint64(b, v)
				}
			}
		}
		return b
	}
	cases := map[string][]byte{"empty": nil, "one": values(1, 1, 20)}
	// Every run length from 1 to 181 and some far longer, in turn: most
	// match length codes in one block.
	var lengths []byte
	for l := 1; len(lengths) < 8*40000; l = l%181 + 1 {
		if l%60 == 0 {
			l = 1500 + l
		}
		v := r.Uint64() >> 40
		for range l {
			lengths = binary.LittleEndian.AppendUint64(lengths, v)
		}
	}
	cases["many lengths"] = lengths
	for _, n := range []int{3, 100, 16383, 16384, 16385, 65536, 100000} {
		for _, maxRun := range []int{1, 2, 12, 30, 5000} {
			for _, w := range []uint{8, 22, 64} {
				cases[fmt.Sprint(n, "values/runs<=", maxRun, "/bits=", w)] = values(n, maxRun, w)
			}
		}
	}
	for name, body := range cases {
		frame, err := pc.appendRunsFrame([]byte("x"), body, nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := dec.DecodeAll(frame[1:], nil)
		if err != nil {
			t.Fatalf("%s: decode: %v", name, err)
		}
		if !bytes.Equal(got, body) {
			t.Fatalf("%s: decoded %d bytes that differ from the %d written", name, len(got), len(body))
		}
		// The runs as a writer finds them (fillPlainDense) give the same
		// frame as the scan of each block.
		if len(body) > 8 {
			given, err := pc.appendRunsFrame([]byte("x"), body, pageRuns(body))
			if err != nil {
				t.Fatalf("%s: with runs: %v", name, err)
			}
			if !bytes.Equal(given, frame) {
				t.Fatalf("%s: frame from the page's runs differs from the scanned one (%d bytes, %d)", name, len(given), len(frame))
			}
		}
	}
	body := values(65536, 20, 22)
	frame, _ := pc.appendRunsFrame(nil, body, nil)
	ref := pc.zstd.EncodeAll(body, nil)
	if len(frame) > len(ref)*11/10 {
		t.Errorf("runs of 22-bit values: %d bytes, zstd %d", len(frame), len(ref))
	}
	t.Logf("runs of 22-bit values: %d bytes, zstd fastest %d", len(frame), len(ref))
}

// pageRuns are the ends of body's runs of equal 8-byte values over the
// whole page, as fillPlainDense finds them.
func pageRuns(body []byte) []int32 {
	var ends []int32
	for i := 1; i < len(body)/8; i++ {
		if binary.LittleEndian.Uint64(body[8*i:]) != binary.LittleEndian.Uint64(body[8*i-8:]) {
			ends = append(ends, int32(i))
		}
	}
	return append(ends, int32(len(body)/8))
}

func BenchmarkRunsFrame(b *testing.B) {
	pc, _ := newPageCodec(Zstd, zstd.SpeedFastest)
	r := rand.New(rand.NewPCG(7, 8))
	var body []byte
	for len(body) < 8<<16 {
		v := r.Uint64() >> 42
		for range 10 {
			body = binary.LittleEndian.AppendUint64(body, v)
		}
	}
	body = body[:8<<16]
	for _, c := range []struct {
		name string
		f    func(dst []byte) []byte
	}{
		{"runs", func(dst []byte) []byte { out, _ := pc.appendRunsFrame(dst, body, nil); return out }},
		{"zstd", func(dst []byte) []byte { return pc.zstd.EncodeAll(body, dst) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				dst = c.f(dst[:0])
			}
			b.ReportMetric(float64(len(dst))/float64(len(body)/8), "B/value")
		})
	}
}

// TestFillPlainMatchesSeparatePasses checks the fused pass of the src
// column (fillPlainDense, fillPlainMapped) against the passes it replaced:
// the AVX2 bounds, the values written one by one, and a scan for runs.
func TestFillPlainMatchesSeparatePasses(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	ids := make([]int64, 1<<22)
	for i := range ids {
		ids[i] = int64(r.Uint64() >> 1)
	}
	for _, tc := range []struct {
		n, maxRun int
		bits      uint
	}{{1, 1, 8}, {2, 1, 8}, {7, 3, 4}, {100, 12, 22}, {16385, 30, 20}, {65536, 25, 20}, {65536, 1, 20}, {131072, 5000, 20}} {
		page := make([]uint32, 0, tc.n)
		for len(page) < tc.n {
			v := uint32(r.Uint64N(1 << tc.bits))
			for range min(1+int(r.Uint64N(uint64(tc.maxRun))), tc.n-len(page)) {
				page = append(page, v)
			}
		}
		want := make([]byte, 0, 8*tc.n)
		for _, v := range page {
			want = binary.LittleEndian.AppendUint64(want, uint64(v))
		}
		wlo, whi := bounds32(page)
		body := make([]byte, 8*tc.n)
		lo, hi, ends := fillPlainDense(body, make([]int32, tc.n+1), page)
		if !bytes.Equal(body, want) || lo != wlo || hi != whi || !slices.Equal(ends, pageRuns(want)) {
			t.Errorf("%d values, runs <= %d: bounds %d..%d (want %d..%d), %d runs (want %d), body equal %v",
				tc.n, tc.maxRun, lo, hi, wlo, whi, len(ends), len(pageRuns(want)), bytes.Equal(body, want))
		}
		want = want[:0]
		mapped := make([]int64, len(page))
		for i, v := range page {
			mapped[i] = ids[v]
			want = binary.LittleEndian.AppendUint64(want, uint64(ids[v]))
		}
		mlo, mhi := bounds(mapped)
		lo64, hi64, ends := fillPlainMapped(body, ends[:0], page, ids)
		if !bytes.Equal(body, want) || lo64 != mlo || hi64 != mhi || !slices.Equal(ends, pageRuns(want)) {
			t.Errorf("mapped, %d values, runs <= %d: bounds %d..%d (want %d..%d), %d runs (want %d)",
				tc.n, tc.maxRun, lo64, hi64, mlo, mhi, len(ends), len(pageRuns(want)))
		}
	}
}
