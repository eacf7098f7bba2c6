package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
	"weak"

	"gocloud.dev/blob"
)

// Local directories (file:// buckets) are written by LocalFile directly
// rather than through gocloud's fileblob writer, which can do none of what
// the output needs: it puts its temporary file next to the target (inside
// the batch directory, where a killed process leaves it for DuckDB and
// Spark to read) or in os.TempDir (often another mount, where the final
// rename fails); it never fsyncs; and its IfNotExist is a stat followed by
// a rename, not atomic. Here a temporary file is written under the
// prefix's staging directory, fsynced, and renamed into place (a part) or
// hard-linked (the manifest: link fails if the target exists, an atomic
// create-if-absent), and the directory is fsynced after.
//
// Reads, listings and deletes still go through the bucket.

// TempDirName is the staging directory of local temporary files, directly
// under the prefix. Its leading dot hides it from Spark and Hive partition
// discovery, and temporary files end in ".tmp", never ".parquet".
const TempDirName = ".walkstage-tmp"

// bucketInfo is what OpenBucket knew about a bucket that gocloud does not
// tell afterwards.
type bucketInfo struct {
	localDir string // file://: the directory
	s3Name   string // s3://: the bucket name, for multipart upload listings
}

var (
	localMu    sync.Mutex
	localRoots = map[weak.Pointer[blob.Bucket]]bucketInfo{}
)

// registerBucket remembers what OpenBucket knew about b, for as long as b
// lives.
func registerBucket(b *blob.Bucket, info bucketInfo) {
	wp := weak.Make(b)
	localMu.Lock()
	localRoots[wp] = info
	localMu.Unlock()
	runtime.AddCleanup(b, func(wp weak.Pointer[blob.Bucket]) {
		localMu.Lock()
		delete(localRoots, wp)
		localMu.Unlock()
	}, wp)
}

// LocalRoot returns the directory of a file:// bucket opened by
// OpenBucket; ok is false for other buckets (which are written through
// gocloud, without the guarantees above).
func LocalRoot(b *blob.Bucket) (string, bool) {
	info := lookupBucket(b)
	return info.localDir, info.localDir != ""
}

func lookupBucket(b *blob.Bucket) bucketInfo {
	localMu.Lock()
	defer localMu.Unlock()
	return localRoots[weak.Make(b)]
}

// LocalPath maps a key to its file the way fileblob does, for the keys
// walkstage makes (no control characters, "..", "//" or trailing slash, which
// fileblob would escape); ok is false for others.
func LocalPath(root, key string) (string, bool) {
	if key == "" || strings.HasSuffix(key, "/") || strings.Contains(key, "//") || strings.HasPrefix(key, "/") {
		return "", false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "." || seg == ".." {
			return "", false
		}
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 32 || key[i] == 0x7f {
			return "", false
		}
	}
	return filepath.Join(root, filepath.FromSlash(key)), true
}

// LocalStaging is the staging directory for the prefix.
func LocalStaging(root, prefix string) string {
	return filepath.Join(root, filepath.FromSlash(strings.Trim(prefix, "/")), TempDirName)
}

// LocalFile is an object being written to a local directory.
type LocalFile struct {
	f         *os.File
	tmp, path string
	// exclusive makes Close fail with ErrExists instead of replacing path.
	exclusive bool
	done      bool
}

// ErrExists is returned by an exclusive LocalFile's Close when the target
// exists.
var ErrExists = errors.New("object exists")

// NewLocalFile starts writing path through a temporary file in staging
// whose name starts with tag (see StagingTag), so a redelivery of the batch
// finds its own leftovers.
func NewLocalFile(staging, tag, path string, exclusive bool) (*LocalFile, error) {
	if err := os.MkdirAll(staging, 0o777); err != nil {
		return nil, fmt.Errorf("create staging directory: %w", err)
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	// The base name first, so an operator sees what a leftover was; the
	// random part keeps concurrent writers of one key apart.
	tmp := filepath.Join(staging, tag+"-"+filepath.Base(path)+"."+hex.EncodeToString(rnd[:])+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return nil, err
	}
	return &LocalFile{f: f, tmp: tmp, path: path, exclusive: exclusive}, nil
}

func (l *LocalFile) Write(p []byte) (int, error) { return l.f.Write(p) }

// Close makes the object durable and visible: file fsynced, moved into
// place, its directory fsynced (and the directory's own entry, when it was
// just created).
func (l *LocalFile) Close() error {
	if l.done {
		return errors.New("local object closed twice")
	}
	l.done = true
	defer os.Remove(l.tmp) // a no-op after a rename; the temporary link after a link
	if err := l.f.Sync(); err != nil {
		l.f.Close()
		return fmt.Errorf("fsync %s: %w", l.tmp, err)
	}
	if err := l.f.Close(); err != nil {
		return err
	}
	dir := filepath.Dir(l.path)
	if err := mkdirAllSynced(dir); err != nil {
		return err
	}
	if l.exclusive {
		if err := linkExclusive(l.tmp, l.path); err != nil {
			return err
		}
	} else if err := os.Rename(l.tmp, l.path); err != nil {
		return err
	}
	return syncDir(dir)
}

// linkExclusive publishes tmp at path unless path exists. A hard link does
// that atomically. File systems without hard links (some FUSE, SMB and
// object-store mounts answer EPERM or ENOTSUP) get a check then a rename,
// which two writers can both pass: on those, concurrent writers of one
// batch are last-writer-wins.
func linkExclusive(tmp, path string) error {
	err := os.Link(tmp, path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrExist):
		return ErrExists
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.ENOTSUP), errors.Is(err, syscall.EXDEV):
		if _, serr := os.Lstat(path); serr == nil {
			return ErrExists
		}
		return os.Rename(tmp, path)
	}
	return err
}

// Abort discards the object.
func (l *LocalFile) Abort() {
	if l.done {
		return
	}
	l.done = true
	l.f.Close()
	os.Remove(l.tmp)
}

// mkdirAllSynced creates dir and its missing parents, fsyncing the parent
// of each one created so the new entries survive a power loss.
func mkdirAllSynced(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSynced(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o777); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

// StagingTag names a batch directory in staging file names: short, fixed
// length, and the same for every writer of the batch.
func StagingTag(dir string) string {
	h := fnv.New64a()
	h.Write([]byte(dir))
	return hex.EncodeToString(h.Sum(nil))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// RemoveStaleTemps deletes temporary files not modified for olderThan: in
// the staging directory whose names start with base (all when base is
// empty), and, when batchDir is set, the temporary files fileblob (which
// walkstage used before the staging directory) left inside the batch
// directory ("part-*.parquet.<hex>.tmp", "_SUCCESS.<hex>.tmp"). A live writer's file is younger: it is written to
// continually, and a stalled upload fails after its stall timeout
// (GuardStall, sink.WithUploadStallTimeout).
func RemoveStaleTemps(ctx context.Context, staging, base, batchDir string, olderThan time.Duration) (removed int, err error) {
	cutoff := time.Now().Add(-olderThan)
	var errs []error
	scan := func(dir string, match func(string) bool) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				errs = append(errs, ctx.Err())
				return
			}
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".tmp") || !match(e.Name()) {
				continue
			}
			info, err := e.Info()
			if err != nil || !info.ModTime().Before(cutoff) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
				removed++
			} else if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	scan(staging, func(name string) bool { return strings.HasPrefix(name, base) })
	if batchDir != "" {
		scan(batchDir, fileblobTemp.MatchString)
	}
	return removed, errors.Join(errs...)
}
