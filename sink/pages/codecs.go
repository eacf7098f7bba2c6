package pages

import (
	"fmt"
	"strings"
)

// Compression names a Parquet page codec.
type Compression string

const (
	Zstd   Compression = "zstd" // default: zstd at its fastest level
	Snappy Compression = "snappy"
	None   Compression = "none"
)

// ParseCompression accepts zstd, snappy or none (case-insensitive;
// "uncompressed" is none).
func ParseCompression(s string) (Compression, error) {
	switch strings.ToLower(s) {
	case "zstd", "":
		return Zstd, nil
	case "snappy":
		return Snappy, nil
	case "none", "uncompressed":
		return None, nil
	}
	return "", fmt.Errorf("unknown compression %q (want zstd, snappy or none)", s)
}

// WalkEncoding names the Parquet encoding of the walk list's values (the
// walk.list.element column). Both are standard encodings of Parquet's
// INT64, but only DeltaBinaryPacked, the default, is read by every common
// reader: DuckDB reads BYTE_STREAM_SPLIT for FLOAT and DOUBLE alone
// ("BYTE_STREAM_SPLIT encoding is only supported for FLOAT or DOUBLE
// data"), and did not plan to add INT64.
type WalkEncoding string

const (
	// AutoWalkEncoding (the default) is DeltaBinaryPacked, whatever the
	// codec.
	AutoWalkEncoding WalkEncoding = ""
	// DeltaBinaryPacked stores bit-packed differences of consecutive values
	// (each miniblock of 32 at the width of its widest): DuckDB, Arrow
	// (C++, Go, pyarrow), arrow-rs and polars, hyparquet, Spark and
	// parquet-go read it. The difference of two random ids takes one bit
	// more than an id, and the packed bits are near-uniform bytes under
	// any codec (R-MAT scale 22 under zstd: 2.99 bytes per walk vertex,
	// against 2.80 for ByteStreamSplit; docs/design/performance-notes.md). The
	// encoder packs full blocks with AVX2 (delta_amd64.s) from the
	// vertices as they lie.
	DeltaBinaryPacked WalkEncoding = "delta_binary_packed"
	// ByteStreamSplit stores byte k of every value in the page's k-th
	// stream. DuckDB cannot read it for INT64 (Arrow, pyarrow, polars and
	// hyparquet can). External ids use only their low bytes, so the high
	// streams are constant, and the top used byte of each id takes few
	// values: under zstd the encoder stores the first as RLE blocks and
	// entropy-codes the second, 6% fewer bytes than DeltaBinaryPacked on
	// R-MAT walks. Without zstd the constant streams stay (5 of 8 bytes at
	// scale 22).
	ByteStreamSplit WalkEncoding = "byte_stream_split"
)

// ParseWalkEncoding accepts delta_binary_packed (or delta),
// byte_stream_split (or split) and auto (or ""; the default, which is
// delta_binary_packed), case-insensitively.
func ParseWalkEncoding(s string) (WalkEncoding, error) {
	switch strings.ToLower(s) {
	case "auto", "":
		return AutoWalkEncoding, nil
	case "byte_stream_split", "split":
		return ByteStreamSplit, nil
	case "delta_binary_packed", "delta":
		return DeltaBinaryPacked, nil
	}
	return "", fmt.Errorf("unknown walk encoding %q (want delta_binary_packed, byte_stream_split (DuckDB cannot read it) or auto)", s)
}
