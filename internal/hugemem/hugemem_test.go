package hugemem

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"
)

func TestAdviseSmallAndEmpty(t *testing.T) {
	// Nothing to advise: must neither fail nor touch memory it does not own.
	Advise([]byte(nil))
	Advise(make([]uint32, 10))
	Advise(make([]byte, 3<<20)) // may hold no whole aligned 2 MiB page
}

// TestAdviseMarksMapping checks, on Linux with THP in madvise or always
// mode, that the kernel recorded the advice on the mapping that holds the
// array (smaps lists "hg" among the VmFlags of an madvise(MADV_HUGEPAGE)
// area).
func TestAdviseMarksMapping(t *testing.T) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		t.Skip("no transparent huge pages here")
	}
	s := make([]uint64, 8<<20/8) // 8 MiB: holds at least three aligned huge pages
	Advise(s)
	addr := uintptr(unsafe.Pointer(&s[len(s)/2]))
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
		if f := strings.Fields(line); len(f) >= 5 && !strings.HasSuffix(f[0], ":") {
			var lo, hi uintptr
			if n, _ := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); n == 2 {
				in = lo <= addr && addr < hi
				continue
			}
		}
		if in && strings.HasPrefix(line, "VmFlags:") {
			if !strings.Contains(line, " hg") {
				t.Fatalf("mapping of the advised array lacks the hg flag: %s", line)
			}
			return
		}
	}
	t.Fatalf("no mapping holds %#x", addr)
}
