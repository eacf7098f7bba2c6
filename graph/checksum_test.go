package graph

import (
	"context"
	"hash/crc64"
	"math/rand/v2"
	"testing"
)

func TestCRC64Combine(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	data := make([]byte, 100000)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for _, cut := range []int{0, 1, 7, 8, 9, 1000, 65536, 99999, 100000} {
		a, b := data[:cut], data[cut:]
		want := crc64.Checksum(data, crcTable)
		got := crc64Combine(crc64.Checksum(a, crcTable), crc64.Checksum(b, crcTable), int64(len(b)))
		if got != want {
			t.Fatalf("cut %d: combine %016x, want %016x", cut, got, want)
		}
	}
	if got, want := checksumParallel(data[:5], nil, data[5:70000], data[70000:]), crc64.Checksum(data, crcTable); got != want {
		t.Fatalf("parallel %016x, want %016x", got, want)
	}
}

func TestGraphChecksumMatchesChecksum(t *testing.T) {
	g, err := GenerateRMAT(context.Background(), RMATOptions{Scale: 16, EdgeFactor: 16, Seed: 2, Undirected: true, Weighted: true, Labels: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, gr := range append([]*Graph{g}, func() []*Graph {
		var out []*Graph
		for _, x := range testGraphs(t) {
			out = append(out, x)
		}
		return out
	}()...) {
		if got, want := graphChecksum(gr), gr.Checksum(); got != want {
			t.Fatalf("%s: parallel checksum %016x, Checksum %016x", gr.Name, got, want)
		}
	}
}
