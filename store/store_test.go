package store

import "testing"

func TestObjectURL(t *testing.T) {
	for _, tc := range []struct{ bucket, key, want string }{
		{"s3://bkt?endpoint=x&region=y", "a/b", "s3://bkt/a/b"},
		{"file:///tmp/w", "a/b", "file:///tmp/w/a/b"},
	} {
		if got := ObjectURL(tc.bucket, tc.key); got != tc.want {
			t.Errorf("ObjectURL(%q, %q) = %q, want %q", tc.bucket, tc.key, got, tc.want)
		}
	}
}
