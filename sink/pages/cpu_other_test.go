//go:build !linux

package pages

// threadCPU is 0 where the thread's CPU time is not to be had.
func threadCPU() int64 { return 0 }
