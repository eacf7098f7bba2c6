package sink

// Output "visits": one row per query with its top-k candidates, written by
// a BatchWriter opened with BatchMeta.Queries > 0. It shares the batch's
// layout, per-attempt part names, create-if-absent manifest and
// fingerprint rules with walk output (Commit, Abort); only the rows differ.

import (
	"context"
	"errors"
	"fmt"

	"github.com/parquet-go/parquet-go"

	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/walk/visits"
)

// OutputVisits is the manifest's "output" of a visits batch (walk batches
// leave it empty).
const OutputVisits = "visits"

// MetaOutput is the Parquet key-value metadata key naming a visits part.
const MetaOutput = "walkstage.output"

// visitRowGroupRows is the number of queries per row group: at top_k 100,
// about 2.4 MiB of candidates before compression.
const visitRowGroupRows = 1024

// VisitRow is one query as stored in Parquet:
//
//	query_id STRING, steps INT64,
//	candidates LIST<STRUCT<vertex INT64, visits INT64, score DOUBLE>>
//
// candidates ordered by visits (descending), then vertex id; vertices are
// external ids; score = visits / steps.
type VisitRow struct {
	QueryID    string           `parquet:"query_id"`
	Steps      int64            `parquet:"steps"`
	Candidates []VisitCandidate `parquet:"candidates,list"`
}

// VisitCandidate is one element of VisitRow.Candidates.
type VisitCandidate struct {
	Vertex int64   `parquet:"vertex"`
	Visits int64   `parquet:"visits"`
	Score  float64 `parquet:"score"`
}

// StringVisitRow is VisitRow for a graph with string ids: the candidates'
// vertices are their string ids (dictionary-encoded).
type StringVisitRow struct {
	QueryID    string                 `parquet:"query_id"`
	Steps      int64                  `parquet:"steps"`
	Candidates []StringVisitCandidate `parquet:"candidates,list"`
}

// StringVisitCandidate is one element of StringVisitRow.Candidates.
type StringVisitCandidate struct {
	Vertex string  `parquet:"vertex,dict"`
	Visits int64   `parquet:"visits"`
	Score  float64 `parquet:"score"`
}

// visitState is a visits batch being written: rows buffered for the next
// row group, the part being written, the totals for the manifest.
type visitState struct {
	buf        []VisitRow
	rows       int64 // handed to WriteVisits
	written    int64 // encoded into parts
	walks      int64
	candidates int64
	p          *part
	pw         *parquet.GenericWriter[VisitRow]
	// A graph with string ids: buf holds dense ids as vertices, written
	// as StringVisitRows by spw.
	spw   *parquet.GenericWriter[StringVisitRow]
	sbuf  []StringVisitRow
	parts int
}

// WriteVisits appends the rows of queries, in query order: ids[k] names
// results[k]. It may be called several times; rows are grouped into row
// groups and parts by count and size alone, so the same results give the
// same bytes however they were handed over. Not safe for concurrent use.
func (w *BatchWriter) WriteVisits(ctx context.Context, ids []string, results []visits.VisitResult) error {
	v := w.visits
	if v == nil {
		return errors.New("sink: WriteVisits on a walk batch (BatchMeta.Queries is 0)")
	}
	if len(ids) != len(results) {
		return fmt.Errorf("sink: %d query ids for %d results", len(ids), len(results))
	}
	if err := w.failed(); err != nil {
		return err
	}
	if v.rows+int64(len(results)) > w.meta.Queries {
		return w.fail(fmt.Errorf("sink: batch %s: %w: more than %d queries", w.meta.BatchID, ErrBadChunk, w.meta.Queries))
	}
	nv := uint32(w.g.NumVertices())
	for k, r := range results {
		row := VisitRow{QueryID: ids[k], Steps: r.Steps, Candidates: make([]VisitCandidate, len(r.Candidates))}
		for x, c := range r.Candidates {
			if c.Vertex >= nv {
				return w.fail(fmt.Errorf("sink: batch %s: %w: candidate vertex %d beyond the graph's %d", w.meta.BatchID, ErrBadChunk, c.Vertex, nv))
			}
			vertex := w.g.ExternalID(c.Vertex)
			if w.g.HasStringIDs() {
				vertex = int64(c.Vertex) // its string at flushVisits
			}
			row.Candidates[x] = VisitCandidate{Vertex: vertex, Visits: c.Visits, Score: float64(c.Visits) / float64(r.Steps)}
		}
		v.buf = append(v.buf, row)
		v.rows++
		v.walks += r.Walks
		v.candidates += int64(len(r.Candidates))
		if len(v.buf) == visitRowGroupRows {
			if err := w.flushVisits(ctx); err != nil {
				return w.fail(err)
			}
		}
	}
	return nil
}

// flushVisits writes the buffered rows as one row group, opening a part
// when none is open and closing it once it reaches the file size.
func (w *BatchWriter) flushVisits(ctx context.Context) error {
	v := w.visits
	if len(v.buf) == 0 {
		return nil
	}
	if v.p == nil {
		if err := w.openVisitPart(); err != nil {
			return err
		}
	}
	p := v.p
	var err error
	if v.spw != nil {
		v.sbuf = v.sbuf[:0]
		for _, r := range v.buf {
			sr := StringVisitRow{QueryID: r.QueryID, Steps: r.Steps, Candidates: make([]StringVisitCandidate, len(r.Candidates))}
			for x, c := range r.Candidates {
				sr.Candidates[x] = StringVisitCandidate{Vertex: w.g.ExternalString(uint32(c.Vertex)), Visits: c.Visits, Score: c.Score}
			}
			v.sbuf = append(v.sbuf, sr)
		}
		if _, err = v.spw.Write(v.sbuf); err == nil {
			err = v.spw.Flush()
		}
	} else if _, err = v.pw.Write(v.buf); err == nil {
		err = v.pw.Flush()
	}
	if err != nil {
		return fmt.Errorf("sink: write %s: %w", p.key, err)
	}
	p.addRows(&v.written, len(v.buf))
	for _, r := range v.buf {
		p.file.Steps += r.Steps
	}
	v.buf = v.buf[:0]
	if p.out.n >= w.cfg.fileBytes {
		return w.closeVisitPart()
	}
	return ctx.Err()
}

func (w *BatchWriter) openVisitPart() error {
	v := w.visits
	p, err := w.newPart(v.parts)
	if err != nil {
		return err
	}
	opts := w.rowPartOptions(v.parts, OutputVisits, visitRowGroupRows)
	v.p = p
	if w.g.HasStringIDs() {
		v.spw = parquet.NewGenericWriter[StringVisitRow](p.out, opts...)
	} else {
		v.pw = parquet.NewGenericWriter[VisitRow](p.out, opts...)
	}
	v.parts++
	return nil
}

func (w *BatchWriter) closeVisitPart() error {
	v := w.visits
	p, closeWriter := v.p, func() error { return v.pw.Close() }
	if v.spw != nil {
		closeWriter = v.spw.Close
	}
	err := w.sealPart(p, closeWriter)
	v.p, v.pw, v.spw = nil, nil, nil
	if err != nil {
		return err
	}
	w.walksWritten.Add(p.file.Rows)
	return nil
}

// finishVisits writes what is buffered and closes the last part before
// Commit lists the parts.
func (w *BatchWriter) finishVisits(ctx context.Context) error {
	v := w.visits
	if v.rows != w.meta.Queries {
		return fmt.Errorf("sink: batch %s: %w: %d of %d queries written", w.meta.BatchID, ErrBadChunk, v.rows, w.meta.Queries)
	}
	if err := w.flushVisits(ctx); err != nil {
		return err
	}
	if v.p != nil {
		return w.closeVisitPart()
	}
	return nil
}

// describeVisits completes a visits batch's manifest.
func (w *BatchWriter) describeVisits(m *output.Manifest) {
	v := w.visits
	m.Output, m.Queries, m.Candidates, m.Walks = OutputVisits, v.rows, v.candidates, v.walks
}

// abortVisits abandons the part being written.
func (w *BatchWriter) abortVisits() {
	if v := w.visits; v != nil && v.p != nil {
		w.abortPart(v.p)
		v.p, v.pw, v.spw = nil, nil, nil
	}
}
