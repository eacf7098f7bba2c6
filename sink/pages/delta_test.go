package pages

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"testing"

	"github.com/parquet-go/parquet-go/encoding/delta"
)

// deltaCases are value sequences at the encoder's edges: lengths around
// the miniblock (32) and block (128) of deltas, widths 0 to 64, deltas
// that wrap around int64.
func deltaCases() map[string][]int64 {
	r := rand.New(rand.NewPCG(3, 4))
	cases := map[string][]int64{}
	for _, n := range []int{0, 1, 2, 3, 31, 32, 33, 34, 64, 65, 96, 97, 127, 128, 129, 130, 160, 161, 255, 256, 257, 258, 1000, 1 << 17, 1<<17 + 1} {
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(r.Uint32N(1 << 22))
		}
		cases["random22/"+strconv.Itoa(n)] = v
	}
	ramp := make([]int64, 300)
	for i := range ramp {
		ramp[i] = int64(i) * 7
	}
	cases["constant delta"] = ramp
	cases["constant"] = slices.Repeat([]int64{5}, 300)
	cases["descending"] = []int64{1000, 900, 800, 700, 600, 0}
	cases["extremes"] = []int64{math.MaxInt64, math.MinInt64, 0, -1, math.MaxInt64, math.MaxInt64, math.MinInt64, 1, math.MinInt64}
	wide := make([]int64, 400)
	for i := range wide {
		wide[i] = int64(r.Uint64())
	}
	cases["random64"] = wide
	// One wide miniblock among narrow ones.
	mixed := make([]int64, 300)
	for i := range mixed {
		mixed[i] = int64(i)
	}
	mixed[70] = 1 << 40
	cases["one outlier"] = mixed
	u32 := make([]int64, 260)
	for i := range u32 {
		u32[i] = int64(r.Uint32())
		if i%2 == 0 {
			u32[i] = int64(r.Uint32N(3))
		}
	}
	u32[5], u32[6] = 0, math.MaxUint32
	cases["uint32 extremes"] = u32
	// Miniblocks of every width the AVX2 packer takes (0 to 32): block b
	// of values below 2^(b%33-1), whose deltas span b%33 bits, or, for
	// b%33 = 0, ascending by 0 or 1 (width 1).
	widths := []int64{0} // blocks of deltas then are blocks of values
	for b := range 3 * 33 {
		k := b % 33
		ramp1 := widths[len(widths)-1]
		for range dbpBlock {
			if k == 0 {
				ramp1 += int64(r.IntN(2))
				widths = append(widths, ramp1)
			} else {
				widths = append(widths, int64(r.Uint32N(1<<(k-1))))
			}
		}
	}
	widths = append(widths, slices.Repeat(widths[len(widths)-1:], dbpBlock)...) // width 0
	cases["all widths"] = widths
	return cases
}

// decodeDBP decodes a DELTA_BINARY_PACKED INT64 page with parquet-go.
func decodeDBP(t testing.TB, b []byte) []int64 {
	t.Helper()
	got, err := (&delta.BinaryPackedEncoding{}).DecodeInt64(nil, b)
	if err != nil {
		t.Fatalf("parquet-go cannot decode: %v", err)
	}
	return got
}

// Both encoders' bytes decode, with parquet-go, to the values; where a
// page's last block is full (parquet-go's smallest delta then is the
// block's) they are parquet-go's bytes.
func TestDeltaEncodersRoundTrip(t *testing.T) {
	for name, vals := range deltaCases() {
		t.Run(name, func(t *testing.T) {
			checkDelta(t, vals)
		})
	}
}

func checkDelta(t testing.TB, vals []int64) {
	t.Helper()
	prefix := []byte("levels")
	got := appendDeltaInt64(slices.Clone(prefix), vals)
	if !bytes.HasPrefix(got, prefix) {
		t.Fatal("the encoder overwrote what dst held")
	}
	if dec := decodeDBP(t, got[len(prefix):]); !slices.Equal(dec, vals) && len(vals) > 0 {
		t.Fatalf("int64 encoder: decoded %d values differ from the %d encoded", len(dec), len(vals))
	}
	want, err := (&delta.BinaryPackedEncoding{}).EncodeInt64(nil, vals)
	if err != nil {
		t.Fatal(err)
	}
	if (len(vals)-1)%dbpBlock == 0 && !bytes.Equal(got[len(prefix):], want) {
		t.Fatalf("int64 encoder: %d bytes differ from parquet-go's %d", len(got)-len(prefix), len(want))
	}
	if slices.ContainsFunc(vals, func(v int64) bool { return v < 0 || v > math.MaxUint32 }) {
		return
	}
	u := make([]uint32, len(vals))
	for i, v := range vals {
		u[i] = uint32(v)
	}
	got32, lo, hi := appendDeltaUint32(slices.Clone(prefix), u)
	if !bytes.Equal(got32, got) {
		t.Fatalf("uint32 encoder: %d bytes differ from the int64 encoder's %d", len(got32), len(got))
	}
	if len(u) > 0 && (lo != slices.Min(u) || hi != slices.Max(u)) {
		t.Fatalf("bounds %d..%d, want %d..%d", lo, hi, slices.Min(u), slices.Max(u))
	}
}

// FuzzDeltaEncoders checks the encoders against parquet-go's decoder on
// values read from the input, 8 bytes each, or 4 for the uint32 encoder's
// inputs (the first byte chooses).
func FuzzDeltaEncoders(f *testing.F) {
	for _, vals := range deltaCases() {
		if len(vals) <= 400 {
			b := []byte{0}
			for _, v := range vals {
				b = binary.LittleEndian.AppendUint64(b, uint64(v))
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		var vals []int64
		if b[0]&1 == 0 {
			for b = b[1:]; len(b) >= 8; b = b[8:] {
				vals = append(vals, int64(binary.LittleEndian.Uint64(b)))
			}
		} else {
			for b = b[1:]; len(b) >= 4; b = b[4:] {
				vals = append(vals, int64(binary.LittleEndian.Uint32(b)))
			}
		}
		checkDelta(t, vals)
	})
}

// BenchmarkDelta compares the walk column's encoder with parquet-go's on
// one page of random dense ids of a 4M-vertex graph (the mapping into
// int64s parquet-go needs included). Besides wall time it reports the
// benchmark thread's CPU time a vertex (cpu-ns/vertex), which a machine
// shared with other work inflates less.
func BenchmarkDelta(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	rows, vals := splitRows(r, 2700, 1<<22, nil)
	vs, _ := rows.vertices(0, 2700, len(vals), nil)
	dst := make([]byte, 0, maxDBP32(len(vs))+dbpRoom32)
	var out []byte
	run := func(b *testing.B, f func()) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cpu0 := threadCPU()
		for b.Loop() {
			f()
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vs)), "ns/vertex")
		b.ReportMetric(float64(threadCPU()-cpu0)/float64(b.N*len(vs)), "cpu-ns/vertex")
		b.ReportMetric(float64(len(out))/float64(len(vs)), "B/vertex")
	}
	b.Run("sink", func(b *testing.B) {
		run(b, func() { out, _, _ = appendDeltaUint32(dst[:0], vs) })
	})
	b.Run("map+parquet-go", func(b *testing.B) {
		ext := make([]int64, len(vs))
		run(b, func() {
			for i, v := range vs {
				ext[i] = int64(v)
			}
			out, _ = (&delta.BinaryPackedEncoding{}).EncodeInt64(dst[:0], ext)
		})
	})
}

// packDeltaFramed lays out appendDeltaUint32's bytes in a raw frame's
// blocks, leaving the block headers' bytes alone: for contents that cross
// one or several 128 KiB block boundaries at many offsets within a block
// of deltas (random lengths), of wide and narrow deltas, and of ids at or
// above 2^31 (the scalar blocks).
func TestPackDeltaFramed(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, span := range []uint32{1 << 22, 1 << 9, 1<<32 - 1} {
		for range 12 {
			vs := make([]uint32, 1+r.IntN(500_000))
			for i := range vs {
				vs[i] = r.Uint32N(span)
			}
			want, wlo, whi := appendDeltaUint32(nil, vs)
			frame := bytes.Repeat([]byte{0xee}, 9+rawAt(maxDBP32(len(vs)))+dbpRoom32)
			var d [dbpBlock + 1]uint64
			n, lo, hi := packDeltaFramed(frame, vs, &d)
			if n != len(want) || lo != wlo || hi != whi {
				t.Fatalf("%d values below %d: %d bytes, bounds %d..%d; want %d, %d..%d", len(vs), span, n, lo, hi, len(want), wlo, whi)
			}
			got := make([]byte, n)
			copyFromFrame(got, frame, 0)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d values below %d: the frame's content differs from appendDeltaUint32's bytes", len(vs), span)
			}
			for k := 0; k*maxRawBlock < n; k++ {
				if h := frame[k*(maxRawBlock+3) : k*(maxRawBlock+3)+3]; !bytes.Equal(h, []byte{0xee, 0xee, 0xee}) {
					t.Fatalf("%d values below %d: block header %d overwritten: %x", len(vs), span, k, h)
				}
			}
		}
	}
}
