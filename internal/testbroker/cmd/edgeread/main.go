// Command edgeread measures what a consumer alone pulls from an edge topic
// (issue 37: is the broker or the fetch path the bound of the stage's
// ingest?). -mode raw reads every partition from its first offset with a
// kafka-go Reader configured as source.EdgeReader configures its own,
// without decoding; -mode decode runs source.EdgeReader itself (fetch and
// livegraph.Decode, a goroutine a partition). It stops after -records
// records and prints a RESULT line. It is measurement tooling: nothing in
// the stage imports it.
//
//	WALKSTAGE_BROKERS=127.0.0.1:9092 edgeread -topic walkstage-edges-x -records 3272 -mode decode
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/walkstage/walkstage/source"
)

func main() {
	brokers := flag.String("brokers", os.Getenv("WALKSTAGE_BROKERS"), "comma-separated brokers (WALKSTAGE_BROKERS)")
	topic := flag.String("topic", "", "the edge topic")
	records := flag.Int64("records", 0, "stop after this many records")
	mode := flag.String("mode", "raw", "raw or decode")
	parts := flag.Int("partitions", 4, "partitions of the topic (raw mode)")
	maxBytes := flag.Int("max-bytes", 16<<20, "largest fetch (source.EdgeReader's default)")
	timeout := flag.Duration("timeout", time.Minute, "stop after this long even when -records did not arrive")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var n, bytes, updates atomic.Int64
	t0 := time.Now()
	done := make(chan struct{})
	var once sync.Once
	count := func(b, u int) {
		bytes.Add(int64(b))
		updates.Add(int64(u))
		if n.Add(1) >= *records {
			once.Do(func() { close(done) })
		}
	}
	switch *mode {
	case "raw":
		for p := 0; p < *parts; p++ {
			go func() {
				r := kafka.NewReader(kafka.ReaderConfig{Brokers: strings.Split(*brokers, ","), Topic: *topic, Partition: p, MinBytes: 1, MaxBytes: *maxBytes, MaxWait: 250 * time.Millisecond})
				defer r.Close()
				_ = r.SetOffset(kafka.FirstOffset)
				for {
					m, err := r.FetchMessage(ctx)
					if err != nil {
						return
					}
					count(len(m.Value), 0)
				}
			}()
		}
	case "decode":
		er, err := source.NewEdgeReader(source.EdgeReaderConfig{Kafka: source.KafkaOptions{Brokers: strings.Split(*brokers, ",")}, Topic: *topic, DLQTopic: "walkstage-dlq", MaxBytes: *maxBytes})
		if err != nil {
			fmt.Fprintln(os.Stderr, "edgeread:", err)
			os.Exit(2)
		}
		out := make(chan source.EdgeBatch, 256)
		go func() { _ = er.Run(ctx, out) }()
		go func() {
			for b := range out {
				count(0, len(b.Updates))
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	s := time.Since(t0).Seconds()
	fmt.Printf("RESULT edgeread mode=%s records=%d bytes=%d updates=%d seconds=%.3f records_per_s=%.0f MB_per_s=%.1f updates_per_s=%.0f\n",
		*mode, n.Load(), bytes.Load(), updates.Load(), s, float64(n.Load())/s, float64(bytes.Load())/s/1e6, float64(updates.Load())/s)
}
