package sink_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/sink"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/store"
	"github.com/walkstage/walkstage/walk"
	"github.com/walkstage/walkstage/walk/cpu"
)

// A one-batch writer: the engine's chunks go to Write as they are emitted,
// Commit writes `_SUCCESS` last, and any failure is followed by Abort.
func ExampleNewBatchWriter() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "walks")
	defer os.RemoveAll(dir)

	g, err := graph.FromEdges([]graph.Edge{{Src: 10, Dst: 20}, {Src: 20, Dst: 30}, {Src: 30, Dst: 10}},
		graph.BuildOptions{Name: "triangle", Undirected: true})
	if err != nil {
		log.Fatal(err)
	}
	bucket, err := store.OpenBucket(ctx, "file://"+dir)
	if err != nil {
		log.Fatal(err)
	}
	defer bucket.Close()

	algo := walk.Algorithm{Kind: walk.DeepWalk, Length: 4}
	job := walk.Job{Algorithm: algo, Seed: 42, Starts: []uint32{0, 1, 2, 0, 1, 2}}
	w, err := sink.NewBatchWriter(ctx, bucket, "walks", sink.BatchMeta{
		BatchID: "example", Algorithm: algo, Seed: job.Seed, Engine: "cpu", WalkstageVersion: "dev", Walks: int64(len(job.Starts)),
	}, g, sink.WithCompression(sink.Snappy))
	if err != nil {
		log.Fatal(err)
	}
	eng, err := cpu.New(g)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	err = eng.Run(ctx, []walk.Job{job}, func(c walk.Chunk) error { return w.Write(ctx, c) })
	var m *output.Manifest
	if err == nil {
		m, err = w.Commit(ctx)
	}
	if err != nil {
		w.Abort(ctx)
		log.Fatal(err)
	}
	fmt.Println(w.Layout().SuccessKey())
	// Part names carry the writer's attempt id: part-00000-<12 hex digits>.parquet.
	fmt.Println(m.Walks, "walks,", m.Steps, "steps in", len(m.Files), "part:", m.Files[0].Key[:len(m.Files[0].Key)-len("0123456789ab.parquet")])
	// Output:
	// walks/kind=walks/graph=triangle/algorithm=deepwalk/batch=example/_SUCCESS
	// 6 walks, 24 steps in 1 part: walks/kind=walks/graph=triangle/algorithm=deepwalk/batch=example/part-00000-
}
