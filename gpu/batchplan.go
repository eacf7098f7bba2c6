package gpu

// Batch sizing on the host side (issue 35: a batch sized by the device,
// not by the pinned result buffer). A batch's pinned host buffers are its
// tasks (16 bytes a walk) and lengths (4 bytes a walk), which the device
// needs whole, and the packed walk rows. Under a stream plan every batch
// sweeps the streamed partitions again, so a host budget that cuts the
// rows into many batches multiplies the bytes copied over the bus (at
// scale 22 from disk under 2.4 GB: 9 batches and 495 GB where one batch
// copies 62 GB). With a result window the rows stay on the device after
// the walk and come back through a pinned window in pieces of whole
// chunks (two halves: the device fills one while the cores cut the other
// into chunks), so the window bounds the pinned memory and the chunks in
// flight, and only the tasks and lengths bound the batch.

// hostTaskBytes is a walk's pinned bytes besides its row: task and length.
const hostTaskBytes = 16 + 4

// maxBatchWords bounds a batch's packed vertices: the pack's offsets and
// total are 32-bit, and a pinned buffer above 8 GiB is refused.
const maxBatchWords = 8 << 30 / 4

// hostBatch is what the pinned host buffers allow a batch of walks of
// stride words.
type hostBatch struct {
	walks int64 // most walks a batch holds
	// words is the pinned packed-row buffer in vertices: the whole
	// batch's rows (walks*stride), or less when windowed.
	words    int64
	windowed bool
}

// planHostBatch sizes a batch's pinned host buffers from hostBytes for a
// group of total walks of stride words, capped at maxWalks (0: no cap).
// window is the result window in bytes (0: none, the rows come back
// whole, so they and the tasks share hostBytes walk by walk). A window
// no smaller than the batch's rows is no window.
func planHostBatch(hostBytes, window, stride, total int64, maxWalks int) hostBatch {
	capWalks := func(n int64) int64 {
		n = min(n, total, 1<<31-1)
		if maxWalks > 0 {
			n = min(n, int64(maxWalks))
		}
		return n
	}
	if window > 0 {
		// Each half holds a walk at least (windowChunkWalks).
		window = max(window, 2*stride*4)
		n := capWalks(min((hostBytes-window)/hostTaskBytes, maxBatchWords/stride))
		if w := window / 4; n*stride > w {
			return hostBatch{walks: n, words: w, windowed: true}
		}
		// The rows fit the window: copied back whole.
		return hostBatch{walks: n, words: n * stride}
	}
	n := capWalks(hostBytes / (stride*4 + hostTaskBytes))
	return hostBatch{walks: n, words: n * stride}
}

// rowsFor is the pinned packed-row words a slot needs for batches of walks
// walks of stride words under h: all their rows, or the window.
func (h hostBatch) rowsFor(walks, stride int64) int64 {
	if h.windowed {
		return min(h.words, walks*stride)
	}
	return walks * stride
}

// batchCount is the batches a group of total walks is cut into when the
// device holds deviceWalks walks a batch and the host buffers h.
func batchCount(total, deviceWalks int64, h hostBatch) int64 {
	per := min(deviceWalks, h.walks)
	if total <= 0 || per < 1 {
		return 0
	}
	return (total + per - 1) / per
}

// resultWindow is the window a disk plan's pinned result share of
// resultBytes gets: a quarter of it (the rest holds the tasks and lengths
// of many walks: 20 bytes each against 356 for an 80-step row), at most
// maxResultWindow (larger pieces only delay the first chunk).
func resultWindow(resultBytes int64) int64 {
	return min(resultBytes/4, maxResultWindow)
}

const maxResultWindow = 256 << 20

// windowPieces groups consecutive chunk pieces of words[i] vertices each
// into windows of at most half words (the window's halves) and returns
// each window's end index: window k is pieces [ends[k-1], ends[k]). A
// piece larger than half is an error the caller prevents by cutting
// smaller chunks (windowChunkWalks).
func windowPieces(words []int64, half int64) ([]int, bool) {
	var ends []int
	var in int64
	for i, w := range words {
		if w > half {
			return nil, false
		}
		if in+w > half {
			ends = append(ends, i)
			in = 0
		}
		in += w
	}
	if len(words) > 0 {
		ends = append(ends, len(words))
	}
	return ends, true
}

// windowChunkWalks is the walks a chunk of a windowed batch takes: the
// configured chunk size, less when such chunks of walks of up to
// maxVertices vertices would not fit half the window of words.
func windowChunkWalks(chunkWalks int, maxVertices, words int64) int {
	return int(max(min(int64(chunkWalks), words/2/maxVertices), 1))
}
