package message

// Bounds on what the stage derives from a message: a batch id taken from a
// message key and log fields taken from a message may be any size its topic
// accepts, and go to places with their own, often smaller, limits (event
// keys, logs). The dead-letter copy and the event record are bounded where
// they are written (package source).

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// MaxDerivedIDBytes bounds a batch id taken from a message key (a rejected
// request whose body names no valid batch id): the id is the completion
// event's key and batch_id, and appears in logs. A longer key becomes its
// first 128 bytes, "...", its size and its SHA-256 (see BoundID).
const MaxDerivedIDBytes = 256

// maxLogBytes bounds a log field taken from a message.
const maxLogBytes = 256

// BoundID returns id when it is at most MaxDerivedIDBytes long, else its
// first 128 bytes (not splitting a UTF-8 sequence), "..." and
// "[N bytes, sha256 H]": distinct long keys stay distinct, and the id
// names what it came from.
func BoundID(id string) string {
	if len(id) <= MaxDerivedIDBytes {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return fmt.Sprintf("%s...[%d bytes, sha256 %s]", cutUTF8(id, 128), len(id), hex.EncodeToString(sum[:]))
}

// LogValue bounds a log field taken from a message to a few hundred
// bytes, marking what it cut.
func LogValue(s string) string { return Clip(s, maxLogBytes) }

// Clip shortens s to at most n bytes (n >= 32), saying how long it was.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	tail := fmt.Sprintf("...[%d bytes]", len(s))
	return cutUTF8(s, n-len(tail)) + tail
}

// cutUTF8 is s's first n bytes or fewer, not splitting a UTF-8 sequence.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
