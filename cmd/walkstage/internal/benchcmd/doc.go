// Package benchcmd is `walkstage bench`: walk throughput of an engine on a
// generated or given graph, one row per algorithm (and for visits, graph
// sampling and placement plans), without object storage. Run is the entry
// package main puts in its table.
package benchcmd
