package cpu

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/walkstage/walkstage/walk"
)

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
		if a, _, _, d := walk.Philox(lo[3], hi[3], c2, c3, k0, k1); got[0][3] != a || got[3][3] != d {
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
			if a, b, c, d := walk.Philox(lo[l], hi[l], steps[l], c3, k0, k1); [4]uint32{got[0][l], got[1][l], got[2][l], got[3][l]} != [4]uint32{a, b, c, d} {
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
			if a, b, c, d := walk.Philox(lo[l], hi[l], c2[l], c3, k0, k1); [4]uint32{got[0][l], got[1][l], got[2][l], got[3][l]} != [4]uint32{a, b, c, d} {
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
				x += walk.Unit24(out[0][0]) // scalar float work between calls, as in the walkers
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
