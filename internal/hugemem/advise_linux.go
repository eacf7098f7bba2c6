package hugemem

import "syscall"

func advise(addr, n uintptr) {
	// Errors (EINVAL where THP is compiled out) leave the pages as they are.
	_, _, _ = syscall.Syscall(syscall.SYS_MADVISE, addr, n, syscall.MADV_HUGEPAGE)
}
