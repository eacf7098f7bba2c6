// Package prefetch asks the processor to start loading cache lines that a
// loop will read a little later: the walkers of walk/cpu and walk/ooc step
// many walks in turn and prefetch each one's next lines among the others'
// work, so their misses overlap. On amd64 these are PREFETCHT0
// instructions (assembly: a prefetch never faults); elsewhere, or with the
// purego tag, Rows loads the bytes instead and Lines4 does nothing.
package prefetch
