// Package walkcmd is `walkstage walk`: one request walked once on a graph
// file, without Kafka, and written to object storage as the stage writes
// it (walks, visits or graph samples, with its manifest), refusing to
// overwrite another request's output under the same batch id. Command is
// the entry package main puts in its table; engines build the engine and
// sink writes the batch.
package walkcmd
