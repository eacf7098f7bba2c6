package hugemem

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestWholePages(t *testing.T) {
	const mb = 1 << 20
	cases := []struct {
		start, size uintptr
		lo, hi      uintptr // 0, 0: empty
	}{
		{0, 0, 0, 0},
		{2 * mb, 3 * mb, 0, 0},           // under two huge pages: not worth a system call
		{2 * mb, 4 * mb, 2 * mb, 6 * mb}, // aligned
		{3 * mb, 5 * mb, 4 * mb, 8 * mb}, // unaligned start: the partial page is left out
		{3 * mb, 4 * mb, 4 * mb, 6 * mb}, // one whole page inside
		{1, 4*mb - 2, 0, 0},              // no whole page inside
		{6*mb + 5, 9 * mb, 8 * mb, 14 * mb},
	}
	for _, c := range cases {
		lo, hi := wholePages(c.start, c.size)
		if hi <= lo {
			lo, hi = 0, 0
		}
		if lo != c.lo || hi != c.hi {
			t.Errorf("wholePages(%#x, %#x) = [%#x, %#x), want [%#x, %#x)", c.start, c.size, lo, hi, c.lo, c.hi)
		}
	}
	Advise([]byte(nil)) // nothing to advise
	Advise(make([]uint32, 10))
}

// TestAdviseMarksMapping checks, where the kernel accepts the advice and
// reports VmFlags, that it recorded it on the mapping that holds the array
// ("hg" among the VmFlags of an madvise(MADV_HUGEPAGE) area).
func TestAdviseMarksMapping(t *testing.T) {
	s := make([]uint64, 8<<20/8) // 8 MiB: holds at least three whole huge pages
	lo, hi := wholePages(uintptr(unsafe.Pointer(&s[0])), uintptr(len(s))*8)
	if err := advise(lo, hi-lo); err != nil {
		t.Skipf("no transparent huge pages here: %v", err)
	}
	addr := lo
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	in := false
	for sc.Scan() {
		line := sc.Text()
		// A mapping starts with a line "start-end perms offset dev inode [path]";
		// its attribute lines ("Size:", "VmFlags:") follow.
		if fl := strings.Fields(line); len(fl) >= 5 && !strings.HasSuffix(fl[0], ":") {
			var a, b uintptr
			if n, _ := fmt.Sscanf(fl[0], "%x-%x", &a, &b); n == 2 {
				in = a <= addr && addr < b
				continue
			}
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			if !strings.Contains(line+" ", " hg ") {
				t.Fatalf("mapping of the advised array lacks the hg flag: %s", line)
			}
			return
		}
	}
	t.Skip("smaps reports no VmFlags for the array's mapping")
}

// Alloc's memory starts on a huge page, is zeroed and writable, and is
// unmapped after its owner is gone (the cleanup must not crash a later
// collection).
func TestAllocOutsideHeap(t *testing.T) {
	owner := new(int)
	s := Alloc[uint64](owner, 3<<20)
	if len(s) != 3<<20 {
		t.Fatalf("len %d", len(s))
	}
	if p := uintptr(unsafe.Pointer(&s[0])); p%hugePage != 0 {
		t.Errorf("start %#x is not on a huge page", p)
	}
	for i := range s {
		if s[i] != 0 {
			t.Fatalf("s[%d] = %d, want zero memory", i, s[i])
		}
		s[i] = uint64(i)
	}
	if Alloc[byte](owner, 0) != nil {
		t.Error("an empty allocation is not nil")
	}
	runtime.KeepAlive(owner)
	owner = nil
	runtime.GC()
	runtime.GC()
}
