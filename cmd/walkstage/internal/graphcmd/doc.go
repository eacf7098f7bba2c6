// Package graphcmd is `walkstage graph`: making graph files (generate an
// R-MAT graph, import an edge list, export one back), describing them
// (info, with what the engines would need to hold them) and keeping
// versions of them in a catalog (publish, list, prune). Package main puts
// Commands in its table under "graph"; the work is in graph, graph/edgelist
// and catalog, this package only parses flags and reports.
package graphcmd
