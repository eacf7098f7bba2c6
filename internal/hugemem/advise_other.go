//go:build !linux

package hugemem

func advise(addr, n uintptr) {}
