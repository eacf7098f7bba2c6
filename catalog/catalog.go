// Package catalog publishes graph versions to object storage and finds them
// again: each .wsg file is uploaded under a content-addressed key (its
// graph.Version) and a small pointer object, <prefix>/CURRENT, names the
// version to serve. The pointer is written last, and a single object write
// is atomic on every store gocloud.dev supports, so a reader never sees a
// half-uploaded version. Readers verify what they download (size, SHA-256,
// graph structure and content checksum) before trusting it.
//
// The layout under a catalog prefix:
//
//	<prefix>/CURRENT                  pointer (JSON Pointer) to the served version
//	<prefix>/versions/<version>.wsg   the graph file
//	<prefix>/versions/<version>.json  its descriptor (JSON Pointer), for List
//
// It knows graph files and buckets; it knows nothing of walks, Kafka or the
// stage that follows the pointer.
package catalog

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/redact"
	"github.com/walkstage/walkstage/store"
)

// PointerName is the pointer object's name under a catalog prefix.
const PointerName = "CURRENT"

// versionsDir holds the graph files and their descriptors.
const versionsDir = "versions"

// maxPointerBytes bounds a pointer or descriptor read: they are a few
// hundred bytes, and a huge object at that key is not one.
const maxPointerBytes = 64 << 10

// ErrNoCurrent means the catalog has no pointer yet (nothing published).
var ErrNoCurrent = errors.New("catalog: no CURRENT pointer (nothing published yet)")

// ErrCorrupt means a downloaded version does not match its pointer (size,
// SHA-256, graph version) or is not a valid graph file. The caller keeps
// what it has.
var ErrCorrupt = errors.New("catalog: corrupt graph version")

// Pointer describes one published version; CURRENT holds the served one.
type Pointer struct {
	// Format is the pointer's format: absent (0) or 1 for the first one,
	// 2 when it may carry EdgeTopic and EdgeOffsets. A reader refuses a
	// format newer than FormatVersion rather than misread it.
	Format  int       `json:"format,omitempty"`
	Version string    `json:"version"` // graph.Graph.Version (content CRC-64, 16 hex digits)
	Key     string    `json:"key"`     // the graph file's key in the bucket
	Size    int64     `json:"size"`    // bytes
	SHA256  string    `json:"sha256"`  // of the file, lowercase hex
	Name    string    `json:"name"`    // graph.Graph.Name
	Created time.Time `json:"created"` // when it was published
	// EdgeTopic and EdgeOffsets, set on a version a live graph compacted
	// (issue 37), say what it holds: the base it was compacted from plus
	// every record of EdgeTopic below EdgeOffsets (per partition, the
	// offset after the last record applied). A replica that starts from
	// this version reads the topic from there.
	EdgeTopic   string          `json:"edge_topic,omitempty"`
	EdgeOffsets map[int32]int64 `json:"edge_offsets,omitempty"`
	// EdgeEventTime is, for a live graph with a time window, its event
	// time at the compaction (Unix milliseconds): a replica starting from
	// the version resumes the window from it.
	EdgeEventTime *int64 `json:"edge_event_time,omitempty"`
}

// FormatVersion is the newest pointer format this build reads and the one
// it writes.
const FormatVersion = 2

// PublishOptions add what a version holds beyond its file.
type PublishOptions struct {
	// EdgeTopic and EdgeOffsets are the live graph's watermark the version
	// was compacted at (Pointer.EdgeOffsets); both or neither.
	EdgeTopic   string
	EdgeOffsets map[int32]int64
	// EdgeEventTime is the time window's event time then (nil: none).
	EdgeEventTime *int64
}

func (p Pointer) validate() error {
	switch {
	case p.Format > FormatVersion:
		return fmt.Errorf("format %d is newer than this walkstage reads (%d): upgrade it", p.Format, FormatVersion)
	case p.EdgeOffsets != nil && p.EdgeTopic == "":
		return errors.New("edge_offsets without edge_topic")
	case len(p.Version) != 16 || !isHex(p.Version):
		return fmt.Errorf("version %q is not 16 hex digits", p.Version)
	case p.Key == "":
		return errors.New("key is empty")
	case p.Size <= 0:
		return fmt.Errorf("size %d", p.Size)
	case len(p.SHA256) != 64 || !isHex(p.SHA256):
		return fmt.Errorf("sha256 %q is not 64 hex digits", p.SHA256)
	}
	for part, off := range p.EdgeOffsets {
		if part < 0 || off < 0 {
			return fmt.Errorf("edge_offsets: partition %d offset %d is negative", part, off)
		}
	}
	return nil
}

func sameTime(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Catalog is one prefix of a bucket.
type Catalog struct {
	b      *blob.Bucket
	prefix string // "" or without a trailing slash
	url    string // as given, for messages
}

// IsPointerURL reports whether location names a catalog pointer (its path
// ends in /CURRENT) rather than a graph file.
func IsPointerURL(location string) bool {
	u, err := url.Parse(location)
	if err != nil || len(u.Scheme) < 2 {
		return false
	}
	return path.Base(u.Path) == PointerName
}

// Open opens the catalog that rawURL names: a bucket URL whose path is the
// prefix (s3://graphs/social?region=eu-west-1 is prefix "social" of bucket
// "graphs"; for file:///srv/graphs/social the directory itself is the
// catalog). A trailing /CURRENT is accepted and dropped.
func Open(ctx context.Context, rawURL string) (*Catalog, error) {
	u, err := url.Parse(rawURL)
	if err != nil || len(u.Scheme) < 2 {
		return nil, fmt.Errorf("catalog %q: not a URL (s3://bucket/prefix, gs://..., file:///dir)", redact.String(rawURL))
	}
	p := strings.Trim(u.Path, "/")
	if path.Base(p) == PointerName {
		p = strings.Trim(path.Dir(p), "/.")
	}
	bu := *u
	prefix := p
	if u.Scheme == "file" {
		// A directory is the bucket; the prefix is empty.
		bu.Path, prefix = "/"+p, ""
	} else {
		bu.Path, bu.RawPath = "", ""
	}
	b, err := store.OpenBucket(ctx, bu.String())
	if err != nil {
		return nil, fmt.Errorf("catalog %s: %w", redactURL(u), redact.Error(err))
	}
	return &Catalog{b: b, prefix: prefix, url: redactURL(u)}, nil
}

// redactURL is u for messages: without its query (the stage's URLs carry
// store options there, and signed ones their secrets) and masked
// (userinfo) by the helper every component uses.
func redactURL(u *url.URL) string {
	c := *u
	c.RawQuery = ""
	return redact.String(c.String())
}

// Close closes the bucket.
func (c *Catalog) Close() error { return c.b.Close() }

// String is the catalog's URL without its query.
func (c *Catalog) String() string { return c.url }

func (c *Catalog) key(parts ...string) string {
	return path.Join(append([]string{c.prefix}, parts...)...)
}

// PointerKey is CURRENT's key in the bucket.
func (c *Catalog) PointerKey() string { return c.key(PointerName) }

// Publish verifies the graph file at file (structure and content checksum),
// uploads it under its version's key unless an identical copy is already
// there, writes its descriptor, and then, last, replaces CURRENT. A file
// that is not a valid graph is refused before anything is written.
func (c *Catalog) Publish(ctx context.Context, file string) (Pointer, error) {
	return c.PublishWith(ctx, file, PublishOptions{})
}

// PublishWith is Publish with what o adds to the version's descriptor and
// pointer: a live graph's watermark. Re-publishing the same file with
// another watermark (the updates between them changed nothing) writes the
// descriptor again with the new one.
func (c *Catalog) PublishWith(ctx context.Context, file string, o PublishOptions) (Pointer, error) {
	if (o.EdgeTopic == "") != (o.EdgeOffsets == nil) {
		return Pointer{}, fmt.Errorf("publish %s: edge topic %q and edge offsets %v go together", file, o.EdgeTopic, o.EdgeOffsets)
	}
	g, err := graph.LoadWith(file, graph.LoadOptions{VerifyChecksum: true})
	if err != nil {
		return Pointer{}, fmt.Errorf("publish %s: refused: %w", file, err)
	}
	p := Pointer{Format: FormatVersion, Version: g.Version, Name: g.Name, Created: time.Now().UTC().Truncate(time.Millisecond),
		EdgeTopic: o.EdgeTopic, EdgeOffsets: maps.Clone(o.EdgeOffsets), EdgeEventTime: o.EdgeEventTime}
	g.Close()
	p.Key = c.key(versionsDir, p.Version+".wsg")
	sum, size, err := hashFile(file)
	if err != nil {
		return Pointer{}, fmt.Errorf("publish %s: %w", file, err)
	}
	p.SHA256, p.Size = sum, size

	// Re-publishing a version already there, byte for byte, only moves
	// the pointer (a rollback); the version keeps its first date.
	uploaded := false
	if old, err := c.descriptor(ctx, p.Version); err == nil && old.SHA256 == p.SHA256 && old.Size == p.Size && old.Key == p.Key {
		if uploaded, _ = c.b.Exists(ctx, p.Key); uploaded {
			nw := p
			p = old
			p.Format, p.EdgeTopic, p.EdgeOffsets, p.EdgeEventTime = nw.Format, nw.EdgeTopic, nw.EdgeOffsets, nw.EdgeEventTime
			// The same content at a later watermark: the descriptor
			// records the newer one.
			if old.EdgeTopic != p.EdgeTopic || !maps.Equal(old.EdgeOffsets, p.EdgeOffsets) || !sameTime(old.EdgeEventTime, p.EdgeEventTime) {
				if err := c.writeJSON(ctx, c.key(versionsDir, p.Version+".json"), p); err != nil {
					return Pointer{}, fmt.Errorf("publish %s: descriptor: %w", file, err)
				}
			}
		}
	}
	if !uploaded {
		if err := c.upload(ctx, file, p); err != nil {
			return Pointer{}, err
		}
		if err := c.writeJSON(ctx, c.key(versionsDir, p.Version+".json"), p); err != nil {
			return Pointer{}, fmt.Errorf("publish %s: descriptor: %w", file, err)
		}
	}
	if err := c.writeJSON(ctx, c.PointerKey(), p); err != nil {
		return Pointer{}, fmt.Errorf("publish %s: pointer: %w", file, err)
	}
	return p, nil
}

// upload copies file to p.Key, hashing what it sends: a file that changes
// during the upload is caught and its copy deleted.
func (c *Catalog) upload(ctx context.Context, file string, p Pointer) error {
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("publish %s: %w", file, err)
	}
	defer f.Close()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.b.NewWriter(wctx, p.Key, &blob.WriterOptions{ContentType: "application/octet-stream",
		Metadata: map[string]string{"walkstage-version": p.Version, "walkstage-sha256": p.SHA256}})
	if err != nil {
		return fmt.Errorf("publish %s: upload to %s: %w", file, p.Key, err)
	}
	h := sha256.New()
	n, err := io.Copy(w, io.TeeReader(f, h))
	if err == nil && (n != p.Size || hex.EncodeToString(h.Sum(nil)) != p.SHA256) {
		err = fmt.Errorf("%s changed while it was uploaded", file)
	}
	if err != nil {
		cancel() // aborts the write: nothing appears under the key
		w.Close()
		return fmt.Errorf("publish %s: upload to %s: %w", file, p.Key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("publish %s: upload to %s: %w", file, p.Key, err)
	}
	return nil
}

func hashFile(file string) (string, int64, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("read %s: %w", file, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func (c *Catalog) writeJSON(ctx context.Context, key string, p Pointer) error {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	return c.b.WriteAll(ctx, key, append(b, '\n'), &blob.WriterOptions{ContentType: "application/json",
		CacheControl: "no-cache"})
}

func (c *Catalog) readPointer(ctx context.Context, key string) (Pointer, error) {
	r, err := c.b.NewReader(ctx, key, nil)
	if err != nil {
		return Pointer{}, err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, maxPointerBytes+1))
	if err != nil {
		return Pointer{}, err
	}
	if len(data) > maxPointerBytes {
		return Pointer{}, fmt.Errorf("%s: larger than %d bytes: not a pointer", key, maxPointerBytes)
	}
	var p Pointer
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&p); err != nil {
		return Pointer{}, fmt.Errorf("%s: %w", key, err)
	}
	if err := p.validate(); err != nil {
		return Pointer{}, fmt.Errorf("%s: %w", key, err)
	}
	return p, nil
}

func (c *Catalog) descriptor(ctx context.Context, version string) (Pointer, error) {
	return c.readPointer(ctx, c.key(versionsDir, version+".json"))
}

// Current reads CURRENT: ErrNoCurrent when there is none.
func (c *Catalog) Current(ctx context.Context) (Pointer, error) {
	p, err := c.readPointer(ctx, c.PointerKey())
	if gcerrors.Code(err) == gcerrors.NotFound {
		return Pointer{}, fmt.Errorf("%s: %w", c.url, ErrNoCurrent)
	}
	if err != nil {
		return Pointer{}, fmt.Errorf("catalog %s: %w", c.url, err)
	}
	return p, nil
}

// Resolve reads the pointer that rawURL names (a catalog URL, with or
// without /CURRENT).
func Resolve(ctx context.Context, rawURL string) (Pointer, error) {
	c, err := Open(ctx, rawURL)
	if err != nil {
		return Pointer{}, err
	}
	defer c.Close()
	return c.Current(ctx)
}

// Entry is one listed version.
type Entry struct {
	Pointer
	Current bool // CURRENT names it
}

// List returns the published versions, newest first.
func (c *Catalog) List(ctx context.Context) ([]Entry, error) {
	cur, err := c.Current(ctx)
	if err != nil && !errors.Is(err, ErrNoCurrent) {
		return nil, err
	}
	var out []Entry
	it := c.b.List(&blob.ListOptions{Prefix: c.key(versionsDir) + "/"})
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("catalog %s: list: %w", c.url, err)
		}
		if !strings.HasSuffix(obj.Key, ".json") {
			continue
		}
		p, err := c.readPointer(ctx, obj.Key)
		if err != nil {
			return nil, fmt.Errorf("catalog %s: %w", c.url, err)
		}
		out = append(out, Entry{Pointer: p, Current: p.Version == cur.Version})
	}
	slices.SortStableFunc(out, func(a, b Entry) int { return b.Created.Compare(a.Created) })
	return out, nil
}

// Prune removes all but the keep newest versions (files and descriptors).
// The version CURRENT names is never removed, whatever its age. It returns
// the removed versions.
func (c *Catalog) Prune(ctx context.Context, keep int) ([]Pointer, error) {
	if keep < 1 {
		return nil, fmt.Errorf("catalog %s: prune: keep %d must be at least 1", c.url, keep)
	}
	entries, err := c.List(ctx)
	if err != nil {
		return nil, err
	}
	var removed []Pointer
	for i, e := range entries {
		if i < keep || e.Current {
			continue
		}
		for _, k := range []string{e.Key, c.key(versionsDir, e.Version+".json")} {
			if err := c.b.Delete(ctx, k); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
				return removed, fmt.Errorf("catalog %s: prune %s: %w", c.url, k, err)
			}
		}
		removed = append(removed, e.Pointer)
	}
	return removed, nil
}

// Fetch downloads p's file into dir (the system temporary directory when
// empty) and checks its size and SHA-256 against p. The caller removes the
// file. A mismatch is ErrCorrupt; the partial file is removed.
func (c *Catalog) Fetch(ctx context.Context, p Pointer, dir string) (string, error) {
	r, err := c.b.NewReader(ctx, p.Key, nil)
	if err != nil {
		return "", fmt.Errorf("catalog %s: version %s: %w", c.url, p.Version, err)
	}
	defer r.Close()
	f, err := os.CreateTemp(dir, "walkstage-graph-"+p.Version+"-*.wsg")
	if err != nil {
		return "", fmt.Errorf("catalog %s: version %s: download: %w", c.url, p.Version, err)
	}
	h := sha256.New()
	// Read one byte past the size: a longer object is as wrong as a shorter one.
	n, err := io.Copy(io.MultiWriter(f, h), io.LimitReader(r, p.Size+1))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		switch sum := hex.EncodeToString(h.Sum(nil)); {
		case n != p.Size:
			err = fmt.Errorf("%w: %s is %d bytes, the pointer says %d (truncated or replaced)", ErrCorrupt, p.Key, n, p.Size)
		case sum != p.SHA256:
			err = fmt.Errorf("%w: %s has SHA-256 %s, the pointer says %s", ErrCorrupt, p.Key, sum, p.SHA256)
		}
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("catalog %s: version %s: download: %w", c.url, p.Version, err)
	}
	return f.Name(), nil
}

// Load fetches p, verifies it (size, SHA-256, graph structure, content
// checksum, version) and maps it. The downloaded file is unlinked once
// mapped. Any mismatch is ErrCorrupt.
func (c *Catalog) Load(ctx context.Context, p Pointer, dir string) (*graph.Graph, error) {
	name, err := c.Fetch(ctx, p, dir)
	if err != nil {
		return nil, err
	}
	defer os.Remove(name) // the mapping keeps the data alive on Unix
	g, err := graph.LoadWith(name, graph.LoadOptions{VerifyChecksum: true})
	if err != nil {
		return nil, fmt.Errorf("catalog %s: version %s: %w: %w", c.url, p.Version, ErrCorrupt, err)
	}
	if g.Version != p.Version {
		g.Close()
		return nil, fmt.Errorf("catalog %s: %w: %s holds graph version %s, the pointer says %s", c.url, ErrCorrupt, p.Key, g.Version, p.Version)
	}
	return g, nil
}
