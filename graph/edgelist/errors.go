package edgelist

import "errors"

// errSorterFailed stops the reader; the sorter's own error is reported.
var errSorterFailed = errors.New("sorting runs failed")

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
