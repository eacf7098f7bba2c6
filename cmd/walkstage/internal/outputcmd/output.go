package outputcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
	"github.com/walkstage/walkstage/sink/output"
	"github.com/walkstage/walkstage/stage/config"
	"github.com/walkstage/walkstage/store"
)

// Usage is the help of walkstage output, its subcommands with their usage
// lines.
const Usage = `usage: walkstage output <subcommand> [flags]

Reads and tidies what the stage and 'walkstage walk' wrote. A glob over
<prefix>/kind=<kind>/ also sees parts no _SUCCESS manifest lists (attempts
killed or still being written, attempts that lost); these commands go by
the manifests.

subcommands:
  ls    print the committed parts of one output kind, one object URL a line
        walkstage output ls <bucket-url> [--prefix walks] --kind walks|visits|samples [--batch ID] [--format urls|duckdb]
  tidy  remove the parts no manifest lists, once older than an age
        walkstage output tidy <bucket-url> [--prefix walks] --older-than 2h

Run 'walkstage output <subcommand> -h' for its flags.
`

// Commands are the output subcommands (see the command table).
func Commands() map[string]cli.Command {
	return map[string]cli.Command{
		"ls":   {Summary: "print the committed parts of one output kind", Run: outputLs},
		"tidy": {Summary: "remove the parts no manifest lists, once older than an age", Run: outputTidy},
	}
}

// outputFlags are the flags every output subcommand takes.
type outputFlags struct {
	prefix  string
	timeout time.Duration
}

func (o *outputFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.prefix, "prefix", config.Setting("WALKSTAGE_OUTPUT_PREFIX"), "key prefix inside the bucket ($WALKSTAGE_OUTPUT_PREFIX when set)")
	timeout, _ := time.ParseDuration(config.Setting("WALKSTAGE_STORE_TIMEOUT"))
	fs.DurationVar(&o.timeout, "store-timeout", timeout, "deadline of each object-store call ($WALKSTAGE_STORE_TIMEOUT when set)")
}

// bucketArg is the one positional argument, the bucket URL.
func bucketArg(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", errors.New("missing the bucket URL (as WALKSTAGE_OUTPUT_URL: s3://bucket?region=..., gs://bucket, file:///dir)")
	case 1:
		return pos[0], nil
	}
	return "", fmt.Errorf("unexpected argument %q after the bucket URL", pos[1])
}

func outputLs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("output ls", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, `walkstage output ls <bucket-url> [--prefix walks] --kind walks|visits|samples [--batch ID] [--format urls|duckdb]

Prints the object URL of every part the complete _SUCCESS manifests of the
kind list, one a line, batch by batch in key order and each batch's parts in
row order: exactly the committed rows, whatever else lies in the tree.
Batches of the layout before kind= directories are included. A manifest
that does not decode or lists a missing part is named on stderr and left
out. --format duckdb prints a read_parquet([...]) call instead (local paths
for file:// buckets; s3:// needs DuckDB's httpfs and credentials).`)
	var of outputFlags
	of.register(fs)
	kind := fs.String("kind", "", "output kind: walks, visits or samples (required)")
	batch := fs.String("batch", "", "only this batch id")
	format := fs.String("format", "urls", "urls (one a line) or duckdb (a read_parquet call)")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	bucketURL, err := bucketArg(pos)
	if err != nil {
		return cli.UsageErrorf(fs, "%v", err)
	}
	switch *kind {
	case output.KindWalks, output.KindVisits, output.KindSamples:
	case "":
		return cli.UsageErrorf(fs, "--kind is required: walks, visits or samples")
	default:
		return cli.UsageErrorf(fs, "--kind %q is not walks, visits or samples", *kind)
	}
	if *format != "urls" && *format != "duckdb" {
		return cli.UsageErrorf(fs, "--format %q is not urls or duckdb", *format)
	}
	bucket, err := store.OpenBucket(ctx, bucketURL)
	if err != nil {
		return err
	}
	defer bucket.Close()
	found, err := output.ListCommitted(ctx, bucket, of.prefix, *kind, *batch, store.WithCallTimeout(of.timeout))
	if err != nil {
		return err
	}
	w, notes := rf.Writers(stdout, stderr)
	res := lsResult{Kind: *kind, Batches: len(found.Batches), Objects: []string{}, LeftOut: []string{}}
	for _, k := range found.LeftOut {
		fmt.Fprintf(notes, "walkstage output ls: left out %s: the manifest does not decode or lists a part that is missing or of another size\n",
			store.ObjectURL(bucketURL, k))
		res.LeftOut = append(res.LeftOut, store.ObjectURL(bucketURL, k))
	}
	keys := found.Parts()
	for _, k := range keys {
		res.Objects = append(res.Objects, store.ObjectURL(bucketURL, k))
	}
	if *format == "urls" {
		for _, u := range res.Objects {
			fmt.Fprintln(w, u)
		}
		return rf.Print(stdout, res)
	}
	if len(keys) == 0 {
		return fmt.Errorf("no committed %s parts under %s (read_parquet needs at least one file)", *kind, store.ObjectURL(bucketURL, of.prefix))
	}
	res.DuckDB = duckdbList(bucketURL, keys)
	fmt.Fprintln(w, res.DuckDB)
	return rf.Print(stdout, res)
}

// lsResult is output ls's --json line: the committed parts' URLs (the
// event's objects), how many batches' manifests listed them, the
// manifests left out, and with --format duckdb the read_parquet call.
type lsResult struct {
	Kind    string   `json:"kind"`
	Batches int      `json:"batches"`
	Objects []string `json:"objects"`
	LeftOut []string `json:"left_out"`
	DuckDB  string   `json:"duckdb,omitempty"`
}

// duckdbList is a DuckDB read_parquet call over the keys: hive_partitioning
// when every key is of the kind= layout (DuckDB refuses files whose paths
// name different partition columns), local paths for file:// buckets.
func duckdbList(bucketURL string, keys []string) string {
	var b strings.Builder
	b.WriteString("read_parquet([")
	hive := true
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		u := store.ObjectURL(bucketURL, k)
		if p, err := url.Parse(u); err == nil && p.Scheme == "file" {
			u = p.Path
		}
		b.WriteString("'" + strings.ReplaceAll(u, "'", "''") + "'")
		hive = hive && strings.Contains("/"+k, "/kind=")
	}
	b.WriteString("]")
	if hive {
		b.WriteString(", hive_partitioning=true")
	}
	b.WriteString(")")
	return b.String()
}

func outputTidy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("output tidy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, `walkstage output tidy <bucket-url> [--prefix walks] --older-than 2h

Removes the parts that no _SUCCESS manifest lists and that were last
modified longer ago than --older-than: in a batch directory with a complete
manifest, the parts it does not list (attempts that lost); in one without a
manifest, every part (attempts killed or given up). Never a listed part,
never a manifest, nothing but part-*.parquet, and nothing in a directory
whose manifest does not decode or lists a missing part. Afterwards a glob
over <prefix>/kind=<kind>/ reads the committed rows and the parts younger
than the age.

--older-than must exceed the longest attempt at a batch, from its first part
to its manifest, plus the clock skew between this host and the store: a
stage still writing a younger part may yet list it. 0 only while no stage
or 'walkstage walk' writes under the prefix. The last line, "RESULT k=v
...", is for scripts, as is --json.`)
	var of outputFlags
	of.register(fs)
	age := time.Duration(-1)
	fs.Func("older-than", "remove only parts last modified longer ago than this (required; e.g. 2h)", func(s string) (err error) {
		if age, err = time.ParseDuration(s); err == nil && age < 0 {
			err = errors.New("must not be negative")
		}
		return err
	})
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	bucketURL, err := bucketArg(pos)
	if err != nil {
		return cli.UsageErrorf(fs, "%v", err)
	}
	if age < 0 {
		return cli.UsageErrorf(fs, "--older-than is required: longer than the longest attempt at a batch (e.g. 2h); 0 only while nothing writes under the prefix")
	}
	bucket, err := store.OpenBucket(ctx, bucketURL)
	if err != nil {
		return err
	}
	defer bucket.Close()
	t0 := time.Now()
	st, err := output.TidyOrphans(ctx, bucket, of.prefix, age, store.WithCallTimeout(of.timeout))
	el := time.Since(t0)
	where := store.ObjectURL(bucketURL, strings.Trim(of.prefix, "/"))
	if rf.JSON {
		if perr := cli.PrintJSON(stdout, tidyResult{URL: where, Removed: st.Removed(), Unlisted: st.UnlistedRemoved,
			Abandoned: st.AbandonedRemoved, Bytes: st.BytesRemoved, YoungKept: st.YoungKept, Dirs: st.Dirs, DirsLeft: st.DirsLeft,
			DurationSeconds: el.Seconds(), Complete: err == nil}); err == nil {
			err = perr
		}
		return err
	}
	if rf.Quiet {
		return err
	}
	fmt.Fprintf(stdout, "%s: removed %d parts, %d bytes (%d that their batch's manifest does not list, %d in batch directories without a manifest) "+
		"of %d batch directories; kept %d younger than %v; left %d directories alone (manifest undecodable or incomplete)\n",
		where, st.Removed(), st.BytesRemoved, st.UnlistedRemoved, st.AbandonedRemoved, st.Dirs, st.YoungKept, age, st.DirsLeft)
	fmt.Fprintf(stdout, "RESULT removed=%d unlisted=%d abandoned=%d bytes=%d young_kept=%d dirs=%d dirs_left=%d seconds=%.3f complete=%v\n",
		st.Removed(), st.UnlistedRemoved, st.AbandonedRemoved, st.BytesRemoved, st.YoungKept, st.Dirs, st.DirsLeft,
		el.Seconds(), err == nil)
	return err
}

// tidyResult is output tidy's --json line: the keys of its RESULT line,
// the duration as duration_seconds; complete is false when a listing or
// a removal failed (the command then exits 1 after the line).
type tidyResult struct {
	URL             string  `json:"url"` // the bucket URL and prefix
	Removed         int     `json:"removed"`
	Unlisted        int     `json:"unlisted"`
	Abandoned       int     `json:"abandoned"`
	Bytes           int64   `json:"bytes"`
	YoungKept       int     `json:"young_kept"`
	Dirs            int     `json:"dirs"`
	DirsLeft        int     `json:"dirs_left"`
	DurationSeconds float64 `json:"duration_seconds"`
	Complete        bool    `json:"complete"`
}
