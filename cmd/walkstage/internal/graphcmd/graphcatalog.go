package graphcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/walkstage/walkstage/catalog"
	"github.com/walkstage/walkstage/cmd/walkstage/internal/cli"
)

// Usage lines of the catalog subcommands, for the graph subcommand's help.
const graphCatalogUsage = `
catalog subcommands (graph versions in object storage, followed by the stage):
  publish   upload a graph version to a catalog and make it CURRENT (written last)
            walkstage graph publish g.wsg --to s3://bucket/prefix?region=...
  list      list a catalog's versions, newest first (* = CURRENT)
            walkstage graph list --from s3://bucket/prefix?region=...
  prune     remove all but the newest N versions (never the CURRENT one)
            walkstage graph prune --from s3://bucket/prefix?region=... --keep N
`

func graphPublish(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph publish", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, "walkstage graph publish g.wsg --to URL\n\n"+
		"Verifies g.wsg (structure and checksum), uploads it under <prefix>/versions/<version>.wsg\n"+
		"and then replaces <prefix>/CURRENT, which stages with WALKSTAGE_GRAPH=<URL>/CURRENT follow.")
	to := fs.String("to", "", "catalog URL: s3://bucket/prefix?region=..., gs://bucket/prefix, file:///dir (required)")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || *to == "" {
		return cli.UsageErrorf(fs, "one graph file and --to are required")
	}
	c, err := catalog.Open(ctx, *to)
	if err != nil {
		return err
	}
	defer c.Close()
	t0 := time.Now()
	p, err := c.Publish(ctx, pos[0])
	if err != nil {
		return err
	}
	el := time.Since(t0)
	w, _ := rf.Writers(stdout, stderr)
	fmt.Fprintf(w, "published %s version %s (%s, sha256 %s) as %s in %s\n", p.Name, p.Version, cli.HumanBytes(p.Size),
		p.SHA256[:16], p.Key, el.Round(time.Millisecond))
	fmt.Fprintf(w, "CURRENT -> %s\n", p.Version)
	return rf.Print(stdout, publishResult{Catalog: *to, catalogVersion: versionOf(p, true), DurationSeconds: el.Seconds()})
}

// catalogVersion is a graph version in the --json lines of the catalog
// subcommands: the pointer's fields (docs/reference/deploy.md) under the
// keys of graph info's (graph, graph_version, bytes).
type catalogVersion struct {
	Graph   string    `json:"graph"`
	Version string    `json:"graph_version"`
	Key     string    `json:"key"`
	Bytes   int64     `json:"bytes"`
	SHA256  string    `json:"sha256"`
	Created time.Time `json:"created"`
	Current bool      `json:"current"` // CURRENT names it
	// A version a live graph compacted: the edge topic's offsets it holds.
	EdgeTopic   string          `json:"edge_topic,omitempty"`
	EdgeOffsets map[int32]int64 `json:"edge_offsets,omitempty"`
}

func versionOf(p catalog.Pointer, current bool) catalogVersion {
	return catalogVersion{Graph: p.Name, Version: p.Version, Key: p.Key, Bytes: p.Size, SHA256: p.SHA256, Created: p.Created, Current: current,
		EdgeTopic: p.EdgeTopic, EdgeOffsets: p.EdgeOffsets}
}

// publishResult is graph publish's --json line: the version published,
// now CURRENT.
type publishResult struct {
	Catalog string `json:"catalog"`
	catalogVersion
	DurationSeconds float64 `json:"duration_seconds"`
}

// listResult is graph list's --json line: the versions newest first.
type listResult struct {
	Catalog  string           `json:"catalog"`
	Versions []catalogVersion `json:"versions"`
}

// pruneResult is graph prune's --json line; complete is false when a
// removal failed (the command then exits 1 after the line).
type pruneResult struct {
	Catalog  string           `json:"catalog"`
	Removed  []catalogVersion `json:"removed"`
	Complete bool             `json:"complete"`
}

func graphList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, "walkstage graph list --from URL\n\n"+
		"Lists the catalog's graph versions, newest first; * marks CURRENT, the one stages follow.")
	from := fs.String("from", "", "catalog URL: s3://bucket/prefix?region=..., gs://bucket/prefix, file:///dir (required)")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", pos[0])
	}
	if *from == "" {
		return cli.UsageErrorf(fs, "--from is required")
	}
	c, err := catalog.Open(ctx, *from)
	if err != nil {
		return err
	}
	defer c.Close()
	list, err := c.List(ctx)
	if err != nil {
		return err
	}
	if rf.JSON {
		res := listResult{Catalog: *from, Versions: []catalogVersion{}}
		for _, e := range list {
			res.Versions = append(res.Versions, versionOf(e.Pointer, e.Current))
		}
		return cli.PrintJSON(stdout, res)
	}
	if rf.Quiet {
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\tVERSION\tNAME\tSIZE\tCREATED\tSHA256")
	for _, e := range list {
		mark := ""
		if e.Current {
			mark = "*"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", mark, e.Version, e.Name, cli.HumanBytes(e.Size),
			e.Created.Format(time.RFC3339), e.SHA256[:16])
	}
	return tw.Flush()
}

func graphPrune(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("graph prune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = cli.SubUsage(fs, "walkstage graph prune --from URL --keep N\n\n"+
		"Removes all but the newest N versions of the catalog; the CURRENT version is never removed.")
	from := fs.String("from", "", "catalog URL: s3://bucket/prefix?region=..., gs://bucket/prefix, file:///dir (required)")
	keep := fs.Int("keep", 0, "versions to keep, newest first; CURRENT's is kept too (required, at least 1)")
	var rf cli.ResultFlags
	rf.Register(fs)
	pos, err := cli.ParseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return cli.UsageErrorf(fs, "unexpected argument %q", pos[0])
	}
	if *from == "" || *keep < 1 {
		return cli.UsageErrorf(fs, "--from and --keep N (N >= 1) are required")
	}
	c, err := catalog.Open(ctx, *from)
	if err != nil {
		return err
	}
	defer c.Close()
	removed, err := c.Prune(ctx, *keep)
	w, _ := rf.Writers(stdout, stderr)
	res := pruneResult{Catalog: *from, Removed: []catalogVersion{}, Complete: err == nil}
	for _, p := range removed {
		fmt.Fprintf(w, "removed %s (%s, created %s)\n", p.Version, cli.HumanBytes(p.Size), p.Created.Format(time.RFC3339))
		res.Removed = append(res.Removed, versionOf(p, false))
	}
	// What was removed before a failure is said either way.
	if perr := rf.Print(stdout, res); err == nil {
		err = perr
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "%d versions removed\n", len(removed))
	return nil
}
