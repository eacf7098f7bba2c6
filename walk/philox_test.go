package walk

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Known-answer vectors from the Random123 distribution (kat_vectors,
// philox4x32_10).
func TestPhiloxKnownAnswers(t *testing.T) {
	cases := []struct {
		ctr  [4]uint32
		key  [2]uint32
		want [4]uint32
	}{
		{[4]uint32{0, 0, 0, 0}, [2]uint32{0, 0}, [4]uint32{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
		{[4]uint32{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, [2]uint32{0xffffffff, 0xffffffff}, [4]uint32{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
		{[4]uint32{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, [2]uint32{0xa4093822, 0x299f31d0}, [4]uint32{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
	}
	for _, c := range cases {
		if got := philox4x32(c.ctr, c.key); got != c.want {
			t.Errorf("philox4x32(%08x, %08x) = %08x, want %08x", c.ctr, c.key, got, c.want)
		}
	}
}

func TestPhiloxUnrolledMatches(t *testing.T) {
	for i := uint32(0); i < 1000; i++ {
		c := [4]uint32{i * 7919, i ^ 0xdeadbeef, i * 31, i >> 3}
		k := [2]uint32{i * 104729, ^i}
		a, b, cc, d := philox(c[0], c[1], c[2], c[3], k[0], k[1])
		if want := philox4x32(c, k); [4]uint32{a, b, cc, d} != want {
			t.Fatalf("philox(%v,%v) = %08x, want %08x", c, k, [4]uint32{a, b, cc, d}, want)
		}
	}
}

func TestPhilox8MatchesPhilox(t *testing.T) {
	var lo, hi [8]uint32
	var got, want [4][8]uint32
	for i := uint32(0); i < 2000; i++ {
		for l := range lo {
			lo[l], hi[l] = i*2654435761+uint32(l)*40503, i^uint32(l)<<29
		}
		c2, c3, k0, k1 := i*31, i>>2, i*104729, ^i
		philox8(&lo, &hi, c2, c3, k0, k1, &got)
		philox8Go(&lo, &hi, c2, c3, k0, k1, &want)
		if got != want {
			t.Fatalf("philox8 = %08x, want %08x", got, want)
		}
		if a, _, _, d := philox(lo[3], hi[3], c2, c3, k0, k1); got[0][3] != a || got[3][3] != d {
			t.Fatalf("philox8 lane 3 differs from philox")
		}
		var steps [8]uint32
		for l := range steps {
			steps[l] = c2 + uint32(l)*(i%3)
		}
		philox8Steps(&lo, &hi, &steps, c3, k0, k1, &got)
		philox8StepsGo(&lo, &hi, &steps, c3, k0, k1, &want)
		if got != want {
			t.Fatalf("philox8Steps = %08x, want %08x", got, want)
		}
		for l := range steps {
			if a, b, c, d := philox(lo[l], hi[l], steps[l], c3, k0, k1); [4]uint32{got[0][l], got[1][l], got[2][l], got[3][l]} != [4]uint32{a, b, c, d} {
				t.Fatalf("philox8Steps lane %d differs from philox", l)
			}
		}
	}
}

func TestPhilox64MatchesPhilox(t *testing.T) {
	var lo, hi, c2 [64]uint32
	var got, want [4][64]uint32
	for i := uint32(0); i < 500; i++ {
		for l := range lo {
			lo[l], hi[l], c2[l] = i*2654435761+uint32(l)*40503, i^uint32(l)<<27, i*31+uint32(l)*(i%5)
		}
		c3, k0, k1 := i>>2, i*104729, ^i
		philox64(&lo, &hi, &c2, c3, k0, k1, &got)
		philox64By8(&lo, &hi, &c2, c3, k0, k1, &want)
		if got != want {
			t.Fatalf("philox64 = %08x, want %08x", got, want)
		}
		for l := range lo {
			if a, b, c, d := philox(lo[l], hi[l], c2[l], c3, k0, k1); [4]uint32{got[0][l], got[1][l], got[2][l], got[3][l]} != [4]uint32{a, b, c, d} {
				t.Fatalf("philox64 lane %d differs from philox", l)
			}
		}
	}
}

// Legacy-SSE instructions among AVX ones cost the SSE/AVX transition penalty
// on Intel processors: it made philox8 30 times slower than the pure-Go
// fallback on a Xeon. Every instruction of the AVX2 kernel that names an X or
// Y register, directly or through a macro parameter that some invocation
// binds to one, must be VEX-encoded (its mnemonic starts with V).
func TestPhilox8IsVEXOnly(t *testing.T) {
	for _, f := range []string{"philox8_amd64.s", "philox64_amd64.s"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, bad := range legacyVectorInstructions(string(src)) {
			t.Errorf("%s: %s", f, bad)
		}
	}
	// The check catches the instruction that caused the slowdown.
	old := "#define BROADCAST(src, x, y) \\\n\tMOVL src, AX \\\n\tMOVQ AX, x \\\n\tVPBROADCASTD x, y\n\tBROADCAST(c2+16(FP), X2, Y2)\n"
	if got := legacyVectorInstructions(old); len(got) != 1 {
		t.Errorf("the MOVQ into X2 of the old BROADCAST macro: found %q, want it alone", got)
	}
}

// legacyVectorInstructions lists the lines of Go assembly src whose
// instruction is not VEX-encoded yet names a vector register.
func legacyVectorInstructions(src string) []string {
	vecReg := regexp.MustCompile(`^[XYZ][0-9]+$`)
	call := regexp.MustCompile(`^(\w+)\((.*)\)$`)
	type line struct {
		macro string // the #define the line belongs to, if any
		code  string
	}
	var lines []line
	params := map[string][]string{} // macro -> parameter names
	vecParam := map[string]bool{}   // "macro.param" bound to a vector register somewhere
	macro := ""
	for _, raw := range strings.Split(src, "\n") {
		code, _, _ := strings.Cut(raw, "//")
		code = strings.TrimSpace(code)
		cont := strings.HasSuffix(code, "\\")
		code = strings.TrimSpace(strings.TrimSuffix(code, "\\"))
		if rest, ok := strings.CutPrefix(code, "#define "); ok {
			if m := call.FindStringSubmatch(strings.Fields(rest)[0] + strings.Join(strings.Fields(rest)[1:], "")); m != nil {
				macro = m[1]
				for _, p := range strings.Split(m[2], ",") {
					params[macro] = append(params[macro], strings.TrimSpace(p))
				}
			} else {
				macro = strings.Fields(rest)[0]
			}
			code = ""
		}
		if code != "" {
			lines = append(lines, line{macro, code})
		}
		if !cont {
			macro = ""
		}
	}
	for _, l := range lines {
		if m := call.FindStringSubmatch(l.code); m != nil && params[m[1]] != nil {
			for i, arg := range strings.Split(m[2], ",") {
				if i < len(params[m[1]]) && vecReg.MatchString(strings.TrimSpace(arg)) {
					vecParam[m[1]+"."+params[m[1]][i]] = true
				}
			}
		}
	}
	var bad []string
	for _, l := range lines {
		mnemonic, operands, _ := strings.Cut(l.code, " ")
		if strings.HasPrefix(mnemonic, "V") || strings.Contains(mnemonic, "(") {
			continue
		}
		for _, op := range strings.Split(operands, ",") {
			op = strings.TrimSpace(op)
			if vecReg.MatchString(op) || vecParam[l.macro+"."+op] {
				bad = append(bad, l.code)
				break
			}
		}
	}
	return bad
}

func BenchmarkPhilox8(b *testing.B) {
	var lo, hi [8]uint32
	var out [4][8]uint32
	for _, c := range []struct {
		name string
		f    func(lo, hi *[8]uint32, c2, c3, k0, k1 uint32, out *[4][8]uint32)
	}{{"dispatch", philox8}, {"go", philox8Go}} {
		b.Run(c.name, func(b *testing.B) {
			var x float32
			for i := 0; b.Loop(); i++ {
				lo[0] = uint32(i)
				c.f(&lo, &hi, uint32(i), 0, 1, 2, &out)
				x += unit24(out[0][0]) // scalar float work between calls, as in the walkers
			}
			if x < 0 {
				b.Fatal(x)
			}
		})
	}
}

func BenchmarkPhilox64(b *testing.B) {
	var lo, hi, c2 [64]uint32
	var out [4][64]uint32
	for _, c := range []struct {
		name string
		f    func(lo, hi, c2 *[64]uint32, c3, k0, k1 uint32, out *[4][64]uint32)
	}{{"dispatch", philox64}, {"by8", philox64By8}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				lo[0] = uint32(i)
				c.f(&lo, &hi, &c2, 0, 1, 2, &out)
			}
			b.ReportMetric(float64(b.N*64)/b.Elapsed().Seconds()/1e6, "Mlanes/s")
		})
	}
}
