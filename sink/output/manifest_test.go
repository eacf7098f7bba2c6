package output

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDecodeManifestRejects(t *testing.T) {
	good := `{"version":1,"batch_id":"b","graph":"g","graph_version":"v","algorithm":{"name":"deepwalk","length":3,"weighted":false,"sampler":"uniform"},
"seed":1,"engine":"cpu","walkstage_version":"t","compression":"zstd","walks":10,"steps":30,"bytes":100,
"files":[{"key":"k0","rows":4,"first_walk_id":0,"last_walk_id":3,"steps":12,"row_groups":1,"bytes":40,"crc32c":"AAAAAA=="},
{"key":"k1","rows":6,"first_walk_id":4,"last_walk_id":9,"steps":18,"row_groups":1,"bytes":60,"crc32c":"AAAAAA=="}]}`
	if _, err := DecodeManifest([]byte(good)); err != nil {
		t.Fatalf("good manifest rejected: %v", err)
	}
	for name, bad := range map[string]string{
		"version":        strings.Replace(good, `"version":1`, `"version":3`, 1),
		"version 0":      strings.Replace(good, `"version":1`, `"version":0`, 1),
		"seed negative":  strings.Replace(good, `"seed":1`, `"seed":-1`, 1),
		"seed float":     strings.Replace(good, `"seed":1`, `"seed":1.5`, 1),
		"seed too large": strings.Replace(good, `"seed":1`, `"seed":"18446744073709551616"`, 1),
		"seed missing":   strings.Replace(good, `"seed":1,`, ``, 1),
		"unknown field":  strings.Replace(good, `"seed":1`, `"seed":1,"extra":true`, 1),
		"walk gap":       strings.Replace(good, `"first_walk_id":4`, `"first_walk_id":5`, 1),
		"totals":         strings.Replace(good, `"walks":10`, `"walks":11`, 1),
		"trailing":       good + "{}",
		"truncated":      good[:len(good)/2],
		"negative bytes": strings.Replace(good, `"bytes":40`, `"bytes":-40`, 1),
	} {
		if _, err := DecodeManifest([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Seeds up to 2^64-1 must survive JSON readers that hold numbers as
// doubles, so version 2 writes them as strings; version 1 manifests wrote
// numbers, which must still decode exactly.
func TestManifestSeedForms(t *testing.T) {
	const big = uint64(1<<64 - 1)
	m := &Manifest{Version: ManifestVersion, BatchID: "b", Seed: big, Fingerprint: "fp", Files: []File{}}
	data, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"seed": "18446744073709551615"`) {
		t.Fatalf("seed not written as a string:\n%s", data)
	}
	var generic map[string]any // how a float-holding reader sees it
	if err := json.Unmarshal(data, &generic); err != nil {
		t.Fatal(err)
	}
	if generic["seed"] != "18446744073709551615" {
		t.Fatalf("generic reader got seed %v", generic["seed"])
	}
	for _, tc := range []struct {
		name, doc string
		want      uint64
	}{
		{"v2 string", string(data), big},
		{"v1 number max", strings.Replace(strings.Replace(string(data), `"18446744073709551615"`, `18446744073709551615`, 1), `"version": 2`, `"version": 1`, 1), big},
		{"v1 number above 2^53", strings.Replace(string(data), `"18446744073709551615"`, `9007199254740993`, 1), 9007199254740993},
		{"string zero", strings.Replace(string(data), `"18446744073709551615"`, `"0"`, 1), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeManifest([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if got.Seed != tc.want || got.Fingerprint != "fp" {
				t.Fatalf("seed %d fingerprint %q, want %d %q", got.Seed, got.Fingerprint, tc.want, "fp")
			}
		})
	}
	// The committed version 1 corpus (seed 2^64-1 as a number) still reads.
	old, err := os.ReadFile("testdata/manifests/empty.json")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeManifest(old); err != nil || got.Seed != big || got.Version != 1 {
		t.Fatalf("version 1 manifest: %+v, %v", got, err)
	}
}

// FuzzDecodeManifest feeds arbitrary bytes to the manifest decoder, which
// reads documents from shared storage: it must fail cleanly, and whatever
// it accepts must encode and decode to the same manifest.
func FuzzDecodeManifest(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/manifests/*.json")
	for _, p := range seeds {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeManifest(data)
		if err != nil {
			return
		}
		again, err := m.Encode()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := DecodeManifest(again)
		if err != nil {
			t.Fatalf("re-encoded manifest rejected: %v", err)
		}
		if len(m2.Files) != len(m.Files) || m2.Walks != m.Walks || m2.Bytes != m.Bytes {
			t.Fatal("manifest changed through encode and decode")
		}
	})
}
