package catalog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/walkstage/walkstage/graph"
	"github.com/walkstage/walkstage/internal/fakes3"
)

// fakeS3 serves gofakes3 (in memory) over TCP and returns the URL of
// catalog prefix "social" in a fresh bucket.
func fakeS3(t *testing.T) string {
	t.Helper()
	return strings.Replace(fakes3.Bucket(t, "graphs", nil), "s3://graphs?", "s3://graphs/social?", 1)
}

// graphFile writes a small R-MAT graph; seeds give different versions.
func graphFile(t *testing.T, seed uint64) (string, string) {
	t.Helper()
	g, err := graph.GenerateRMAT(context.Background(), graph.RMATOptions{Scale: 8, EdgeFactor: 4, Seed: seed, Name: "social"})
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "g.wsg")
	if err := graph.Save(p, g); err != nil {
		t.Fatal(err)
	}
	return p, g.Version
}

func stores(t *testing.T) map[string]func(*testing.T) string {
	return map[string]func(*testing.T) string{
		"gofakes3": fakeS3,
		"fileblob": func(t *testing.T) string { return "file://" + filepath.Join(t.TempDir(), "social") },
	}
}

func TestPublishListPruneLoad(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			u := store(t)
			c, err := Open(ctx, u)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Current(ctx); !errors.Is(err, ErrNoCurrent) {
				t.Fatalf("empty catalog: Current = %v, want ErrNoCurrent", err)
			}
			var versions []string
			for seed := uint64(1); seed <= 3; seed++ {
				f, v := graphFile(t, seed)
				p, err := c.Publish(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				if p.Version != v || p.Size <= 0 || len(p.SHA256) != 64 {
					t.Fatalf("pointer %+v for version %s", p, v)
				}
				versions = append(versions, v)
				time.Sleep(2 * time.Millisecond) // distinct created times
			}
			// Resolve through the pointer URL, as the stage does.
			pu, _ := url.Parse(u)
			pu.Path += "/" + PointerName
			cur, err := Resolve(ctx, pu.String())
			if err != nil {
				t.Fatal(err)
			}
			if cur.Version != versions[2] {
				t.Fatalf("CURRENT = %s, want the last published %s", cur.Version, versions[2])
			}
			list, err := c.List(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 3 || list[0].Version != versions[2] || !list[0].Current || list[1].Current {
				t.Fatalf("list = %+v", list)
			}
			// Point CURRENT back at the oldest: prune must keep it.
			f1, _ := graphFile(t, 1)
			if _, err := c.Publish(ctx, f1); err != nil {
				t.Fatal(err)
			}
			removed, err := c.Prune(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			list, _ = c.List(ctx)
			if len(removed) != 1 || removed[0].Version != versions[1] || len(list) != 2 {
				t.Fatalf("prune --keep 1 removed %v, left %+v", removed, list)
			}
			for _, e := range list {
				if e.Version == versions[0] && !e.Current {
					t.Fatalf("CURRENT's target not marked current: %+v", list)
				}
			}
			g, err := c.Load(ctx, removed[0], t.TempDir())
			if err == nil {
				t.Fatalf("loaded pruned version %s", removed[0].Version)
			}
			cur, _ = c.Current(ctx)
			g, err = c.Load(ctx, cur, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if g.Version != versions[0] || g.Name != "social" {
				t.Fatalf("loaded %s %s", g.Name, g.Version)
			}
			g.Close()
		})
	}
}

func TestCorruptRefused(t *testing.T) {
	for name, store := range stores(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c, err := Open(ctx, store(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			f, _ := graphFile(t, 1)
			good, err := c.Publish(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := os.ReadFile(f)

			// A truncated file is refused at publish, and CURRENT stays.
			trunc := filepath.Join(t.TempDir(), "trunc.wsg")
			os.WriteFile(trunc, data[:len(data)-100], 0o644)
			if _, err := c.Publish(ctx, trunc); err == nil {
				t.Fatal("published a truncated file")
			}
			// So is one with a flipped content byte (valid structure).
			flip := filepath.Join(t.TempDir(), "flip.wsg")
			bad := append([]byte(nil), data...)
			bad[len(bad)/2] ^= 0x40
			os.WriteFile(flip, bad, 0o644)
			if _, err := c.Publish(ctx, flip); err == nil {
				t.Fatal("published a corrupt file")
			}
			if cur, err := c.Current(ctx); err != nil || !reflect.DeepEqual(cur, good) {
				t.Fatalf("CURRENT after refused publishes: %+v, %v; want %+v", cur, err, good)
			}

			// Objects damaged in the store are refused on download.
			for what, body := range map[string][]byte{"truncated": data[:len(data)/2], "corrupt": bad, "longer": append(data, 0)} {
				if err := c.b.WriteAll(ctx, good.Key, body, nil); err != nil {
					t.Fatal(err)
				}
				if g, err := c.Load(ctx, good, t.TempDir()); !errors.Is(err, ErrCorrupt) {
					if g != nil {
						g.Close()
					}
					t.Fatalf("%s object: Load = %v, want ErrCorrupt", what, err)
				}
			}
			// A pointer whose checksum matches a corrupt file is still
			// refused by the graph's own checks.
			liar := good
			liar.Size = int64(len(bad))
			liar.SHA256 = sha(bad)
			if _, err := c.Load(ctx, liar, t.TempDir()); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("self-consistent corrupt version: Load = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestIsPointerURL(t *testing.T) {
	for in, want := range map[string]bool{
		"s3://graphs/social/CURRENT?region=x": true,
		"file:///srv/graphs/CURRENT":          true,
		"s3://graphs/social/g.wsg":            false,
		"/data/CURRENT":                       false, // a local path is a graph file
		"CURRENT":                             false,
	} {
		if got := IsPointerURL(in); got != want {
			t.Errorf("IsPointerURL(%q) = %v, want %v", in, got, want)
		}
	}
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
