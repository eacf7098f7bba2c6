package sink

import (
	"bytes"
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// arrowTable reads a part with Apache Arrow's Go reader, an implementation
// independent of the writer's, checks that the file says it holds output
// (metadata MetaOutput) and that its schema is exactly want, and returns the
// table (the caller releases it).
func arrowTable(t *testing.T, data []byte, output string, want []arrow.Field) arrow.Table {
	t.Helper()
	mem := memory.DefaultAllocator
	pr, err := file.NewParquetReader(bytes.NewReader(data), file.WithReadProps(parquet.NewReaderProperties(mem)))
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	if v := pr.MetaData().KeyValueMetadata().FindValue(MetaOutput); v == nil || *v != output {
		t.Errorf("metadata %s = %v, want %s", MetaOutput, v, output)
	}
	fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: 4096}, mem)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tbl.Schema().Fields()); n != len(want) {
		tbl.Release()
		t.Fatalf("arrow: %d fields, want %d", n, len(want))
	}
	for i, f := range want {
		got := tbl.Schema().Field(i)
		if got.Name != f.Name || !arrow.TypeEqual(got.Type, f.Type) {
			tbl.Release()
			t.Fatalf("arrow: field %d is %s %s, want %s %s", i, got.Name, got.Type, f.Name, f.Type)
		}
	}
	return tbl
}
