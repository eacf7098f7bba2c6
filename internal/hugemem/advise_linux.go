package hugemem

import "syscall"

func advise(addr, n uintptr) error {
	if _, _, e := syscall.Syscall(syscall.SYS_MADVISE, addr, n, syscall.MADV_HUGEPAGE); e != 0 {
		return e
	}
	return nil
}
