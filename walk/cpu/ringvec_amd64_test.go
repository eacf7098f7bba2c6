//go:build !purego

package cpu

import (
	"encoding/binary"
	"os"
	"regexp"
	"testing"
)

// CPUID's vendor string is the one the kernel reports, so ringVector's
// choice follows the processor it claims to.
func TestCPUIDVendorMatchesKernel(t *testing.T) {
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		t.Skip("no /proc/cpuinfo here")
	}
	m := regexp.MustCompile(`(?m)^vendor_id\s*:\s*(\S+)`).FindSubmatch(info)
	if m == nil {
		t.Skip("/proc/cpuinfo names no vendor")
	}
	b, c, d := cpuidVendor()
	var v [12]byte
	binary.LittleEndian.PutUint32(v[0:], b)
	binary.LittleEndian.PutUint32(v[4:], d)
	binary.LittleEndian.PutUint32(v[8:], c)
	if string(v[:]) != string(m[1]) {
		t.Fatalf("CPUID vendor %q, kernel says %q", v[:], m[1])
	}
	if isIntel() != (string(m[1]) == "GenuineIntel") {
		t.Fatalf("isIntel() = %v for %q", isIntel(), m[1])
	}
}
