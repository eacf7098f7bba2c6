package graph

import "errors"

// The errors callers branch on are exported and wrapped with context by
// the functions that return them: test with errors.Is.

// ErrFormat is wrapped by every error about a malformed graph file.
var ErrFormat = errors.New("malformed graph file")

// ErrInvalid is wrapped by every structural validation failure.
var ErrInvalid = errors.New("invalid graph")

// ErrDuplicate is wrapped by the error for a duplicate edge under DupError.
var ErrDuplicate = errors.New("duplicate edge")

// errBigEndian refuses to read or write a graph file on a big-endian host.
var errBigEndian = errors.New("graph files are little-endian and this host is not; walkstage supports little-endian hosts only")
