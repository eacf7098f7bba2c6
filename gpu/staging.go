package gpu

// The pinned staging's sizes (stagedcopy_cuda.go), apart so that they are
// tested without a device.

// defaultStagingBytes is the most each of the two pinned buffers that
// sampled columns come back through holds (stagedCopy).
const defaultStagingBytes = 32 << 20

// stagedCopyMin is the smallest copy worth staging; below it the driver's
// own copy from pageable memory is as fast.
const stagedCopyMin = 4 << 20

// stagedPieces is about the pieces a staged copy is cut into at least:
// a wave's columns (three or four of about 12 MB for 3 M edges) copied
// column by column in one piece each left the device idle while the
// cores copied each piece out, and the cores idle while it copied the
// next; eight pieces overlap all but one of them.
const stagedPieces = 8

// stagingPiece is the piece a staged copy of total bytes is cut into,
// with buffers of at most most bytes: about a stagedPieces-th of total,
// whole pages, at least stagedCopyMin.
func stagingPiece(most, total int64) int64 {
	return min(most, max(stagedCopyMin, (total/stagedPieces+4095)&^4095))
}

// stagingPinned is what each staging buffer is pinned at for pieces of
// piece bytes: the next power of two (at most most). Waves differ by a few
// per cent, and buffers pinned at each wave's piece were pinned again
// whenever a wave was a little larger than all before: 53 ms of a layer
// sample's 33 waves on the H200 host, where pinning once at the most took
// 32 ms. Rounded up, they are pinned again at most log2(most/stagedCopyMin)
// times.
func stagingPinned(most, piece int64) int64 {
	n := int64(stagedCopyMin)
	for n < piece {
		n *= 2
	}
	return min(most, n)
}
