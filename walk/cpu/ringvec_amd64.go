//go:build !purego

package cpu

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasRingAVX512 says whether this processor can run the ring's fused rounds
// in vector lanes (ringFusedAVX512: gathers, scatters, compares into mask
// registers).
var hasRingAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

// ringVector says whether walkRing uses them. Only on Intel: there they
// measured 13-35% faster than the Go rounds (16-core Xeon host of the GPU
// machine, 16 workers, R-MAT scale 22, docs/design/cpu-engine.md), where on AMD
// Zen 4 (the 2-core development VM) they measured 8% slower: its gathers
// and scatters are slow, and its walk waits on memory either way.
var ringVector = hasRingAVX512 && isIntel()

// isIntel reports whether CPUID names the vendor GenuineIntel.
func isIntel() bool {
	b, c, d := cpuidVendor()
	return b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e // "Genu" "ineI" "ntel"
}

// cpuidVendor returns EBX, ECX and EDX of CPUID leaf 0: the vendor string.
func cpuidVendor() (ebx, ecx, edx uint32)

//go:noescape
func ringFusedAVX512(r *ring, tab unsafe.Pointer, buf unsafe.Pointer, length uint32, keep bool, stopT uint32, wordOff uintptr) uint64
