package gpu

// keptBytes is what a device array kept between sampling calls
// (devArrays.get) is allocated at when a call needs n bytes: a quarter
// more. The waves of `walkstage walk` grow by a fifth after the first
// (message.SampleWave sizes the first by the worst case, the next by the
// mean the first drew): with an eighth to spare, the second wave of a 1
// M-seed neighbour sample allocated every array again, 30 of the run's 60
// allocations and 5.7 of that wave's 16.5 ms on the H200 host.
func keptBytes(n int64) int64 { return n + n/4 }
