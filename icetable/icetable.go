// Package icetable appends the stage's committed batches to Apache Iceberg
// tables, one per output kind (walks, visits, samples), so that readers of
// a table see exactly the committed batches: a batch's Parquet parts,
// already durable and named by its `_SUCCESS` manifest, are added to the
// table in a snapshot whose summary names the batch and its request
// fingerprint. The table commit is the batch's visibility point; the parts
// are not copied.
//
// Exactly once: before each commit the committer reads the batch ids every
// snapshot of the table already names (`walkstage.batches` in the
// summaries), so a redelivered batch, or a commit whose answer was lost and
// is retried, is recognised and not appended twice — the pattern of
// Redpanda Connect's Iceberg output for ambiguous commits. Snapshots the
// stage expires must therefore outlive the input topic's redelivery
// horizon (docs/reference/messages.md, "Iceberg tables").
//
// Group commit: appends that arrive while a commit is in flight go into the
// next one, together (up to MaxFiles data files), so commits keep up with
// the stage without a timer adding latency to an idle one.
//
// Catalogs: a file:// URL is a file-based (Hadoop-layout) catalog on the
// local disk, atomic by rename, for one host (the demo and the tests); an
// http(s):// URL is an Iceberg REST catalog, the production setting.
package icetable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/hadoop"
	"github.com/apache/iceberg-go/catalog/rest"
	"github.com/apache/iceberg-go/table"
)

// SummaryKey is the snapshot summary property that names the batches a
// snapshot appended: "batch-id=fingerprint" entries, comma-separated (batch
// ids cannot hold commas or equals signs: message.ValidBatchID).
const SummaryKey = "walkstage.batches"

// Options configure the tables.
type Options struct {
	// Catalog is file:///path (a file-based catalog with its warehouse at
	// path) or http(s)://host/... (an Iceberg REST catalog).
	Catalog string
	// Props are the catalog's properties (REST: "token", "credential",
	// "warehouse", "scope", ...; see iceberg-go's rest package).
	Props map[string]string
	// Namespace holds the tables (default "walkstage").
	Namespace string
	// MaxFiles bounds the data files of one commit (default 1000).
	MaxFiles int
	// CommitTimeout bounds one commit, loading the table included
	// (default one minute).
	CommitTimeout time.Duration
	// CommitInterval is the least time between two commits of a table
	// (0: commit as soon as the previous commit ends). Appends wait for
	// it: longer intervals make fewer, larger snapshots, and each commit's
	// cost grows with the number of snapshots the table holds.
	CommitInterval time.Duration
	// FlushBatches commits before the interval has passed once this many
	// batches wait (0: only MaxFiles does): the stage sets half the
	// batches it lets wait for their commit, so the interval never
	// stalls it.
	FlushBatches int
	Logger       *slog.Logger
}

// File is one data file of a batch: its URL as readers reach it, its rows
// and its size in bytes (from the batch's manifest).
type File struct {
	URL   string
	Rows  int64
	Bytes int64
}

// Batch is what Append adds: the batch's id, its request fingerprint, the
// kind of its output (the table) and its data files.
type Batch struct {
	Kind        string
	ID          string
	Fingerprint string
	Files       []File
}

// Tables commits batches to the tables of one namespace.
type Tables struct {
	o   Options
	cat catalog.Catalog
	log *slog.Logger

	mu         sync.Mutex
	committers map[string]*committer
}

// Open connects to the catalog and makes sure the namespace exists.
func Open(ctx context.Context, o Options) (*Tables, error) {
	if o.Namespace == "" {
		o.Namespace = "walkstage"
	}
	if o.MaxFiles <= 0 {
		o.MaxFiles = 1000
	}
	if o.CommitTimeout <= 0 {
		o.CommitTimeout = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	cat, err := openCatalog(ctx, o)
	if err != nil {
		return nil, err
	}
	ns := table.Identifier{o.Namespace}
	if ok, err := cat.CheckNamespaceExists(ctx, ns); err != nil {
		return nil, fmt.Errorf("icetable: namespace %s: %w", o.Namespace, err)
	} else if !ok {
		if err := cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			return nil, fmt.Errorf("icetable: create namespace %s: %w", o.Namespace, err)
		}
	}
	return &Tables{o: o, cat: cat, log: o.Logger, committers: map[string]*committer{}}, nil
}

func openCatalog(ctx context.Context, o Options) (catalog.Catalog, error) {
	u, err := url.Parse(o.Catalog)
	if err != nil {
		return nil, fmt.Errorf("icetable: catalog %q: %w", o.Catalog, err)
	}
	props := iceberg.Properties{}
	for k, v := range o.Props {
		props[k] = v
	}
	switch u.Scheme {
	case "file":
		if u.Path == "" || u.Path == "/" {
			return nil, fmt.Errorf("icetable: catalog %q: a file:// catalog needs a warehouse directory", o.Catalog)
		}
		cat, err := hadoop.NewCatalog("walkstage", o.Catalog, props)
		if err != nil {
			return nil, fmt.Errorf("icetable: file catalog at %s: %w", u.Path, err)
		}
		return cat, nil
	case "http", "https":
		var opts []rest.Option
		if t := props["token"]; t != "" {
			opts = append(opts, rest.WithOAuthToken(t))
		}
		if c := props["credential"]; c != "" {
			opts = append(opts, rest.WithCredential(c))
		}
		if w := props["warehouse"]; w != "" {
			opts = append(opts, rest.WithWarehouseLocation(w))
		}
		cat, err := rest.NewCatalog(ctx, "walkstage", o.Catalog, opts...)
		if err != nil {
			return nil, fmt.Errorf("icetable: REST catalog %s: %w", u.Redacted(), err)
		}
		return cat, nil
	}
	return nil, fmt.Errorf("icetable: catalog %q: want file:///warehouse or an http(s) REST catalog URL", o.Catalog)
}

// Append adds b's files to its kind's table and returns once a commit that
// holds them is durable, or at once when a snapshot already names b (a
// redelivery: nothing is added twice). A batch id the table holds with
// another fingerprint is an error (ErrConflict): another request wrote it.
func (t *Tables) Append(ctx context.Context, b Batch) error {
	c, err := t.committer(b.Kind)
	if err != nil {
		return err
	}
	p := &pending{b: b, done: make(chan error, 1)}
	select {
	case c.in <- p:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		// The commit may still land; a retry finds it in the summaries.
		return ctx.Err()
	}
}

// ErrConflict: the table holds the batch id from another request.
var ErrConflict = errors.New("icetable: batch id already committed with another request fingerprint")

// Committed returns the batch ids (and fingerprints) the kind's table
// holds, from its snapshots' summaries.
func (t *Tables) Committed(ctx context.Context, kind string) (map[string]string, error) {
	tbl, err := t.cat.LoadTable(ctx, t.ident(kind))
	if err != nil {
		return nil, fmt.Errorf("icetable: load %s: %w", kind, err)
	}
	return committed(tbl), nil
}

// Table loads the kind's table (for readers and tests).
func (t *Tables) Table(ctx context.Context, kind string) (*table.Table, error) {
	return t.cat.LoadTable(ctx, t.ident(kind))
}

// Close stops the committers; appends waiting on them fail.
func (t *Tables) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.committers {
		close(c.stop)
		<-c.stopped
	}
	t.committers = map[string]*committer{}
	return nil
}

func (t *Tables) ident(kind string) table.Identifier { return table.Identifier{t.o.Namespace, kind} }

func (t *Tables) committer(kind string) (*committer, error) {
	sc, ok := schemas[kind]
	if !ok {
		return nil, fmt.Errorf("icetable: no table schema for output kind %q", kind)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if c := t.committers[kind]; c != nil {
		return c, nil
	}
	c := &committer{t: t, kind: kind, schema: sc, in: make(chan *pending), stop: make(chan struct{}), stopped: make(chan struct{})}
	t.committers[kind] = c
	go c.run()
	return c, nil
}

type pending struct {
	b    Batch
	done chan error
}

// committer commits one table's appends, one commit at a time, each taking
// every append that arrived meanwhile.
type committer struct {
	t       *Tables
	kind    string
	schema  *iceberg.Schema
	in      chan *pending
	stop    chan struct{}
	stopped chan struct{}

	// tbl is the table as this committer's last commit left it and have
	// the batches its snapshots name (nil: load both before the next
	// commit). Only run's goroutine touches them.
	tbl  *table.Table
	have map[string]string
}

func (c *committer) run() {
	defer close(c.stopped)
	var last time.Time // the end of the last commit
	for {
		var group []*pending
		select {
		case p := <-c.in:
			group = append(group, p)
		case <-c.stop:
			return
		}
		files := len(group[0].b.Files)
		// Until the interval has passed (at once without one), take what
		// else is waiting, up to MaxFiles.
		wait := time.NewTimer(max(0, time.Until(last.Add(c.t.o.CommitInterval))))
		full := func() bool {
			return files >= c.t.o.MaxFiles || (c.t.o.FlushBatches > 0 && len(group) >= c.t.o.FlushBatches)
		}
	more:
		for !full() {
			select {
			case p := <-c.in:
				group = append(group, p)
				files += len(p.b.Files)
			case <-wait.C:
				// The interval is over: what is waiting now joins, then
				// the commit starts.
				for !full() {
					select {
					case p := <-c.in:
						group = append(group, p)
						files += len(p.b.Files)
					default:
						break more
					}
				}
				break more
			case <-c.stop:
				wait.Stop()
				for _, p := range group {
					p.done <- errors.New("icetable: closed")
				}
				return
			}
		}
		wait.Stop()
		// Bounded: a catalog that does not answer fails the group's
		// batches, which retry (and find their batches if it landed).
		ctx, cancel := context.WithTimeout(context.Background(), c.t.o.CommitTimeout)
		results := c.commit(ctx, group)
		cancel()
		last = time.Now()
		for i, p := range group {
			p.done <- results[i]
		}
	}
}

// commit appends the group's batches not in the table yet in one snapshot
// and returns each batch's outcome. It works from the table as its last
// commit left it, without reading the catalog again: a commit states the
// snapshot it was built on (iceberg-go asserts the branch head), so when
// another writer (another replica) committed meanwhile, the catalog refuses
// it, and the group is checked again against the table reloaded, then
// committed on top of it. Catalogs do not all say "conflict" the same way
// (the file catalog reports a failed requirement), and an unknown outcome
// (a lost answer) needs the same reload, so every refused commit is tried
// again here, a few times, on the reloaded table, before the batches fall
// back to their own back-off.
func (c *committer) commit(ctx context.Context, group []*pending) []error {
	const retries = 4
	for attempt := 0; ; attempt++ {
		out, err := c.commitOnce(ctx, group)
		if err == nil {
			return out
		}
		c.tbl, c.have = nil, nil // stale or unknown: reload before the next commit
		if errors.Is(err, errCommit) && attempt < retries && ctx.Err() == nil {
			c.t.log.Debug("table commit refused, retrying on the reloaded table", "table", c.kind, "attempt", attempt+1, "error", err)
			select {
			case <-time.After(time.Duration(attempt) * 10 * time.Millisecond):
			case <-ctx.Done(): // the next try fails on ctx and reports it
			}
			continue
		}
		for i := range out {
			if out[i] == nil {
				out[i] = err
			}
		}
		return out
	}
}

// commitOnce is one try of commit: the per-batch outcomes decided before
// the catalog was asked (conflicts, bad files), and the commit's error.
func (c *committer) commitOnce(ctx context.Context, group []*pending) ([]error, error) {
	out := make([]error, len(group))
	if c.tbl == nil {
		tbl, err := c.load(ctx)
		if err != nil {
			return out, err
		}
		if err := refusesReplay(tbl); err != nil {
			return out, err
		}
		c.tbl, c.have = tbl, committed(tbl)
	}
	var files []iceberg.DataFile
	var names []string
	seen := map[string]string{}
	for i, p := range group {
		b := p.b
		if fp, ok := c.have[b.ID]; ok {
			if fp != b.Fingerprint {
				out[i] = fmt.Errorf("%w: batch %s (table %s)", ErrConflict, b.ID, c.kind)
			}
			continue // committed before: a redelivery or a retried commit
		}
		if fp, ok := seen[b.ID]; ok {
			if fp != b.Fingerprint {
				out[i] = fmt.Errorf("%w: batch %s (table %s)", ErrConflict, b.ID, c.kind)
			}
			continue
		}
		seen[b.ID] = b.Fingerprint
		for _, f := range b.Files {
			df, err := iceberg.NewDataFileBuilder(*iceberg.UnpartitionedSpec, iceberg.EntryContentData, f.URL, iceberg.ParquetFile,
				nil, nil, nil, f.Rows, f.Bytes)
			if err != nil {
				out[i] = fmt.Errorf("icetable: data file %s of batch %s: %w", f.URL, b.ID, err)
				break
			}
			files = append(files, df.Build())
		}
		if out[i] == nil {
			names = append(names, b.ID+"="+b.Fingerprint)
		}
	}
	if len(files) == 0 {
		return out, nil
	}
	tx := c.tbl.NewTransaction()
	// No duplicate check by path: it reads every manifest of the table
	// (a commit's cost growing with its history), and the batch ids above
	// already keep each batch, and so each of its parts (their keys carry
	// the attempt id), out of a second snapshot.
	if err := tx.AddDataFiles(ctx, files, iceberg.Properties{SummaryKey: strings.Join(names, ",")}, table.WithoutDuplicateCheck()); err != nil {
		return out, fmt.Errorf("icetable: append %d files to %s: %w", len(files), c.kind, err)
	}
	tbl, err := tx.Commit(ctx)
	if err != nil {
		// A conflict (ErrCommitFailed) committed nothing; any other error
		// leaves it unknown whether it landed: the reloaded table's
		// summaries say, before anything is appended again.
		return out, fmt.Errorf("%w to %s: %w", errCommit, c.kind, err)
	}
	c.tbl = tbl
	for _, n := range names {
		id, fp, _ := strings.Cut(n, "=")
		c.have[id] = fp
	}
	c.t.log.Debug("table commit", "table", c.kind, "batches", len(names), "files", len(files))
	return out, nil
}

// errCommit marks the catalog refusing or failing a commit, which commit
// retries on the reloaded table.
var errCommit = errors.New("icetable: commit")

// refusesReplay checks the table leaves commit conflicts to the stage.
// With commit.retry.num-retries above 0, iceberg-go answers a conflict by
// reloading the table and replaying the append on top of it, without the
// summary check that keeps a batch committed by another replica meanwhile
// from being appended twice.
func refusesReplay(tbl *table.Table) error {
	if n := tbl.Properties().GetInt(table.CommitNumRetriesKey, 0); n > 0 {
		return fmt.Errorf("icetable: table %s sets %s=%d: iceberg-go would replay a conflicting append without the stage's check for batches already committed; set it to 0",
			strings.Join(tbl.Identifier(), "."), table.CommitNumRetriesKey, n)
	}
	return nil
}

// load loads the table, creating it on first use.
func (c *committer) load(ctx context.Context) (*table.Table, error) {
	id := c.t.ident(c.kind)
	tbl, err := c.t.cat.LoadTable(ctx, id)
	if err == nil {
		return tbl, nil
	}
	if !errors.Is(err, catalog.ErrNoSuchTable) {
		return nil, fmt.Errorf("icetable: load %s: %w", strings.Join(id, "."), err)
	}
	tbl, err = c.t.cat.CreateTable(ctx, id, c.schema)
	if errors.Is(err, catalog.ErrTableAlreadyExists) {
		return c.t.cat.LoadTable(ctx, id) // another replica created it
	}
	if err != nil {
		return nil, fmt.Errorf("icetable: create %s: %w", strings.Join(id, "."), err)
	}
	return tbl, nil
}

// committed reads the batch ids the table's snapshots name.
func committed(tbl *table.Table) map[string]string {
	out := map[string]string{}
	for _, s := range tbl.Metadata().Snapshots() {
		if s.Summary == nil {
			continue
		}
		for _, e := range strings.Split(s.Summary.Properties[SummaryKey], ",") {
			if id, fp, ok := strings.Cut(e, "="); ok {
				out[id] = fp
			}
		}
	}
	return out
}

// Kinds are the output kinds that have a table schema.
func Kinds() []string {
	ks := make([]string, 0, len(schemas))
	for k := range schemas {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
