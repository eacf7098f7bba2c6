// Package conformance holds the reader conformance test (conformance_test.go):
// walkstage's output of every kind, compression and walk encoding, written by
// the real writer (sink.BatchWriter) and the real stage (the demo), read back
// by readers that share no code with it: Apache Arrow's Go reader in the
// test itself, and DuckDB (@duckdb/node-api) and hyparquet through read.mjs
// on Node.js, at the versions package-lock.json pins. scripts/test.sh
// installs those (`npm ci`, cached); strings_test.go and strings.mjs read the
// output of a graph with string ids the same way. Without them the test skips, or fails
// under WALKSTAGE_INTEGRATION=1.
//
// The package has no code of its own: it must not be imported.
package conformance
