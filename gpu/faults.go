package gpu

// faults is the engine's failure injection, for faults_cuda_test.go (it is
// set through an unexported option or field, so only this package's tests
// can arm it): counting from when it is armed, the allocAt-th allocation
// (device or pinned, 1-based) and the copyAt-th memory copy fail with err
// (or the driver's usual error for that call) instead of reaching the
// driver, once each; 0 never fails. Used on the device thread only.
type faults struct {
	allocAt, copyAt int
	allocs, copies  int
	err             error
}

// failAlloc counts an allocation and says whether it is the one to fail.
func (f *faults) failAlloc() bool {
	if f == nil {
		return false
	}
	f.allocs++
	return f.allocs == f.allocAt
}

// failCopy counts a copy and says whether it is the one to fail.
func (f *faults) failCopy() bool {
	if f == nil {
		return false
	}
	f.copies++
	return f.copies == f.copyAt
}

// errOr is the injected error, def when none was set.
func (f *faults) errOr(def error) error {
	if f.err != nil {
		return f.err
	}
	return def
}
