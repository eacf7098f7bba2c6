package output

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/walk"
)

// ManifestVersion is the version of the `_SUCCESS` document this package
// writes; readers reject versions they do not know. Version 2 added
// "fingerprint" and writes "seed" as a JSON string; DecodeManifest still
// reads version 1 documents (seed as a number, no fingerprint).
const ManifestVersion = 2

// oldestManifestVersion is the oldest version DecodeManifest reads.
const oldestManifestVersion = 1

// Manifest is the `_SUCCESS` object of a batch: it lists every part with its
// size and checksum, and carries the batch's metadata. It holds no
// timestamps, so the same batch written twice yields the same bytes.
type Manifest struct {
	Version      int           `json:"version"`
	BatchID      string        `json:"batch_id"`
	Graph        string        `json:"graph"`
	GraphVersion string        `json:"graph_version"`
	Algorithm    AlgorithmMeta `json:"algorithm"`
	// Seed is written as a decimal string: seeds go up to 2^64-1, and JSON
	// readers that hold numbers as doubles (jq, JavaScript) would round it.
	// DecodeManifest also accepts the number of version 1 manifests.
	Seed uint64 `json:"seed,string"`
	// Fingerprint identifies the request that produced the batch (see
	// BatchMeta.Fingerprint); empty in manifests written before it existed
	// or by writers given none.
	Fingerprint      string `json:"fingerprint,omitempty"`
	Engine           string `json:"engine"`
	WalkstageVersion string `json:"walkstage_version"`
	Compression      string `json:"compression"`
	Walks            int64  `json:"walks"`
	Steps            int64  `json:"steps"`
	// Output is "visits" for a batch of query rows (sink/visits.go), whose
	// parts' walk ids are row numbers; empty for walks. Queries and
	// Candidates count its rows and their candidates.
	Output     string `json:"output,omitempty"`
	Queries    int64  `json:"queries,omitempty"`
	Candidates int64  `json:"candidates,omitempty"`
	// Output "samples" (sink/samples.go): its instances and edges (rows).
	Instances int64  `json:"instances,omitempty"`
	Edges     int64  `json:"edges,omitempty"`
	Bytes     int64  `json:"bytes"`
	Files     []File `json:"files"`
	// EdgeOffsets is the watermark of the live graph snapshot the walks
	// ran on (per edge-topic partition, the offset after the last record
	// it holds); absent for walks on a graph version alone.
	EdgeOffsets map[int32]int64 `json:"edge_offsets,omitempty"`

	// dir is the batch directory the manifest was read from (ReadManifest).
	dir string
}

// File describes one Parquet part of a batch.
type File struct {
	Key  string `json:"key"`
	Rows int64  `json:"rows"`
	// FirstWalkID and LastWalkID bound the walk ids of the part's rows, which
	// are stored in ascending walk id order.
	FirstWalkID int64 `json:"first_walk_id"`
	LastWalkID  int64 `json:"last_walk_id"`
	Steps       int64 `json:"steps"`
	RowGroups   int   `json:"row_groups"`
	Bytes       int64 `json:"bytes"`
	// CRC32C of the whole object, base64 of the big-endian value: the form
	// GCS reports in object metadata and S3 in x-amz-checksum-crc32c, so a
	// reader can check a part without a second hash implementation.
	CRC32C string `json:"crc32c"`
}

// AlgorithmMeta is walk.Algorithm in a form readers outside Go understand.
type AlgorithmMeta struct {
	Name     string  `json:"name"`
	Length   int     `json:"length"`
	Weighted bool    `json:"weighted"`
	StopProb float64 `json:"stop_prob,omitempty"`
	P        float64 `json:"p,omitempty"`
	Q        float64 `json:"q,omitempty"`
	Schema   []int   `json:"schema,omitempty"`
	Sampler  string  `json:"sampler"`
	// Graph samplers (DescribeSample); Length is then the hops.
	Fanouts          []int   `json:"fanouts,omitempty"`
	LayerSizes       []int   `json:"layer_sizes,omitempty"`
	Replace          bool    `json:"replace,omitempty"`
	BurnProbability  float64 `json:"burn_probability,omitempty"`
	Depth            int     `json:"depth,omitempty"`
	MaxVertices      int     `json:"max_vertices,omitempty"`
	FrontierSize     int     `json:"frontier_size,omitempty"`
	Samples          int     `json:"samples,omitempty"`
	InstancesPerSeed int     `json:"instances_per_seed,omitempty"`
	// Temporal walks (their request fields, when given).
	TimeBias   string  `json:"time_bias,omitempty"`
	TimeScale  float64 `json:"time_scale,omitempty"`
	StartTime  *int64  `json:"start_time,omitempty"`
	MaxTimeGap *int64  `json:"max_time_gap,omitempty"`
	Direction  string  `json:"direction,omitempty"`
}

// DescribeAlgorithm renders a, as run on g, for metadata.
func DescribeAlgorithm(a walk.Algorithm, g *graph.Graph) AlgorithmMeta {
	m := AlgorithmMeta{Name: a.Kind.String(), Length: a.Length, Weighted: a.Weighted, StopProb: a.StopProb,
		P: a.P, Q: a.Q, Sampler: walk.StepperName(a, g)}
	for _, l := range a.Schema {
		m.Schema = append(m.Schema, int(l))
	}
	if t := a.Time; a.Kind == walk.Temporal {
		m.TimeBias, m.TimeScale, m.Direction = t.Bias.String(), t.Scale, "forward"
		if t.Backward {
			m.Direction = "backward"
		}
		if t.HasStart {
			m.StartTime = &t.Start
		}
		if t.HasMaxGap {
			m.MaxTimeGap = &t.MaxGap
		}
	}
	return m
}

// Kind is the output kind of the manifest's batch: KindWalks, KindVisits
// or KindSamples.
func (m *Manifest) Kind() string {
	if m.Output == "" {
		return KindWalks
	}
	return m.Output
}

// Layout is where the manifest's batch lives under prefix: its directory
// and SuccessKey, for an event re-published from a manifest sink.Lookup found.
// A manifest read from the store (ReadManifest, sink.Lookup) lives where it was
// read, which for a batch written before output kinds had paths of their
// own is not where BatchLayout would put it today.
func (m *Manifest) Layout(prefix string) (Layout, error) {
	if m.dir != "" {
		return Layout{Dir: m.dir}, nil
	}
	return BatchLayout(prefix, m.Kind(), m.Graph, m.Algorithm.Name, m.BatchID)
}

// ErrNoManifest is returned by ReadManifest when the batch has no `_SUCCESS`
// object: it was never written, or its last write did not complete.
var ErrNoManifest = errors.New("no _SUCCESS manifest")

// ReadManifest reads and checks the manifest at key (a Layout's SuccessKey).
// A manifest that does not decode is an error wrapping ErrCorrupt.
func ReadManifest(ctx context.Context, b *blob.Bucket, key string) (*Manifest, error) {
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, fmt.Errorf("read manifest %s: %w", key, ErrNoManifest)
		}
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(r, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	m, err := DecodeManifest(data)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w: %w", key, ErrCorrupt, err)
	}
	if dir, ok := strings.CutSuffix(key, "/"+SuccessName); ok {
		m.dir = dir
	}
	return m, nil
}

// DecodeManifest parses and checks a `_SUCCESS` document: known version,
// no unknown fields, and files consistent with the totals.
func DecodeManifest(data []byte) (*Manifest, error) {
	// The seed field shadows Manifest's, so it can take either form.
	type plain Manifest
	var doc struct {
		*plain
		Seed json.RawMessage `json:"seed"`
	}
	var m Manifest
	doc.plain = (*plain)(&m)
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data after the manifest")
	}
	if m.Version < oldestManifestVersion || m.Version > ManifestVersion {
		return nil, fmt.Errorf("version %d, this build reads %d to %d", m.Version, oldestManifestVersion, ManifestVersion)
	}
	seed, err := decodeSeed(doc.Seed)
	if err != nil {
		return nil, err
	}
	m.Seed = seed
	var rows, steps, size int64
	for i, f := range m.Files {
		if f.Key == "" || f.Rows <= 0 || f.Bytes <= 0 || f.Steps < 0 || f.FirstWalkID < 0 || f.LastWalkID-f.FirstWalkID+1 != f.Rows {
			return nil, fmt.Errorf("file %d (%q): inconsistent rows %d, walk ids %d..%d, bytes %d", i, f.Key, f.Rows, f.FirstWalkID, f.LastWalkID, f.Bytes)
		}
		if f.FirstWalkID != rows {
			return nil, fmt.Errorf("file %d (%q) starts at walk %d, want %d", i, f.Key, f.FirstWalkID, rows)
		}
		rows += f.Rows
		steps += f.Steps
		size += f.Bytes
	}
	wantRows := m.Walks
	switch m.Output {
	case "":
	case KindVisits:
		wantRows = m.Queries
	case KindSamples:
		wantRows = m.Edges
	default:
		return nil, fmt.Errorf("output %q is not %q or %q", m.Output, KindVisits, KindSamples)
	}
	if rows != wantRows || steps != m.Steps || size != m.Bytes {
		return nil, fmt.Errorf("files hold %d walks, %d steps, %d bytes; totals say %d, %d, %d", rows, steps, size, m.Walks, m.Steps, m.Bytes)
	}
	return &m, nil
}

// decodeSeed reads a seed written as a JSON string (version 2) or number
// (version 1). A number is parsed from its digits, never through a float, so
// version 1 seeds above 2^53 come back exact.
func decodeSeed(raw json.RawMessage) (uint64, error) {
	s := string(bytes.TrimSpace(raw))
	if s == "" || s == "null" {
		return 0, errors.New("manifest has no seed")
	}
	if s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, fmt.Errorf("seed: %w", err)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("seed %s: want an unsigned 64-bit integer", raw)
	}
	return v, nil
}

func (m *Manifest) Encode() ([]byte, error) {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// ErrCorrupt is wrapped when a manifest exists but does not decode.
var ErrCorrupt = errors.New("manifest unreadable")

func readManifestTimeout(ctx context.Context, b *blob.Bucket, key string, timeout time.Duration) (*Manifest, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return ReadManifest(ctx, b, key)
}

// ReadComplete reads the manifest at key and checks that every part it
// lists exists with the listed size. A missing manifest gives (nil, false,
// nil); an undecodable one an error wrapping ErrCorrupt.
func ReadComplete(ctx context.Context, b *blob.Bucket, key string, timeout time.Duration) (m *Manifest, complete bool, err error) {
	m, err = readManifestTimeout(ctx, b, key, timeout)
	if errors.Is(err, ErrNoManifest) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	complete, err = PartsPresent(ctx, b, m, timeout)
	return m, complete, err
}

// PartsPresent checks each listed part's size with one metadata request
// (HEAD on S3). Checksums are not verified: that would read the whole
// batch back, gigabytes for a large one; sizes catch a missing or
// truncated part, which is what interrupted or racing writers leave.
func PartsPresent(ctx context.Context, b *blob.Bucket, m *Manifest, timeout time.Duration) (bool, error) {
	for _, f := range m.Files {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		a, err := b.Attributes(cctx, f.Key)
		cancel()
		if gcerrors.Code(err) == gcerrors.NotFound {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("check part %s: %w", f.Key, err)
		}
		if a.Size != f.Bytes {
			return false, nil
		}
	}
	return true, nil
}
