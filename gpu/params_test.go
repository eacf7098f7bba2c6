package gpu

import (
	"testing"
	"unsafe"
)

// TestParamsLayout pins the host mirrors to the sizes the kernels assert
// (kernels/params.cuh static_asserts the same numbers).
func TestParamsLayout(t *testing.T) {
	if n := unsafe.Sizeof(walkParams{}); n != paramsSize {
		t.Fatalf("walkParams is %d bytes, kernels expect %d", n, paramsSize)
	}
	if n := unsafe.Sizeof(task{}); n != 16 {
		t.Fatalf("task is %d bytes, kernels expect 16", n)
	}
	if off := unsafe.Offsetof(walkParams{}.schema); off != 304 {
		t.Fatalf("schema at offset %d, kernels expect 304", off)
	}
	if off := unsafe.Offsetof(walkParams{}.times); off != 368 {
		t.Fatalf("times at offset %d, kernels expect 368", off)
	}
	if off := unsafe.Offsetof(walkParams{}.expSums); off != 448 {
		t.Fatalf("expSums at offset %d, kernels expect 448", off)
	}
	if off := unsafe.Offsetof(walkParams{}.coarse); off != 456 {
		t.Fatalf("coarse at offset %d, kernels expect 456", off)
	}
	if off := unsafe.Offsetof(walkParams{}.next); off != 464 {
		t.Fatalf("next at offset %d, kernels expect 464", off)
	}
}
