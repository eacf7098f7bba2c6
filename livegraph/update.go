package livegraph

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// ErrBadUpdate is wrapped by every error about an edge-update record that
// can never be applied (malformed, or not fitting the graph): the stage
// dead-letters the record with the error as its reason and goes on.
var ErrBadUpdate = errors.New("bad edge update")

// Op is what an update does.
type Op uint8

const (
	// Insert appends an edge src -> dst. The live graph is a multigraph,
	// like an import with --duplicates keep-all: inserting an edge that
	// exists adds a second copy.
	Insert Op = 1
	// Delete removes every copy of src -> dst that exists when it is
	// applied (base and inserted ones); deleting an edge that does not
	// exist does nothing, so a replayed delete is harmless.
	Delete Op = 2
)

func (o Op) String() string {
	switch o {
	case Insert:
		return "insert"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Which optional fields an update carries (Update.Has).
const (
	HasWeight uint8 = 1 << iota
	HasLabel
	HasTime
)

// Update is one edge update in external ids.
type Update struct {
	Op       Op
	Src, Dst int64
	// Weight, Label and Time are set when Has says so: an insert on a
	// weighted graph without a weight gets weight 1, on a labelled graph
	// without a label label 0; a timed graph's inserts must carry a time.
	Weight float32
	Label  uint8
	Time   int64 // Unix milliseconds
	Has    uint8
}

// MaxBatch is the most updates one record may hold (either encoding).
const MaxBatch = 1 << 20

// Decode reads one edge-update record: the binary batch form when it starts
// with BinaryMagic, else JSON (one update object, or an array of them).
// Every error wraps ErrBadUpdate and names the update at fault.
func Decode(rec []byte) ([]Update, error) {
	if bytes.HasPrefix(rec, []byte(BinaryMagic)) {
		return DecodeBinary(rec)
	}
	return DecodeJSON(rec)
}

// jsonUpdate is an update as JSON spells it; ids and times are jsonInt, so
// a 64-bit id may be a decimal string.
type jsonUpdate struct {
	Op     string   `json:"op"`
	Src    *jsonInt `json:"src"`
	Dst    *jsonInt `json:"dst"`
	Weight *float64 `json:"weight"`
	Label  *jsonInt `json:"label"`
	Time   *jsonInt `json:"time"`
}

// jsonInt is an integer written as a JSON number or a decimal string: a
// JSON number past 2^53 loses digits in most producers' encoders, so 64-bit
// ids travel as strings.
type jsonInt int64

func (x *jsonInt) UnmarshalJSON(b []byte) error {
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%s is not a 64-bit integer (a number or a decimal string)", b)
	}
	*x = jsonInt(v)
	return nil
}

// DecodeJSON reads a JSON record: {"op":"insert","src":17,"dst":42} with
// optional "weight", "label" and "time", or an array of such objects.
func DecodeJSON(rec []byte) ([]Update, error) {
	rec = bytes.TrimSpace(rec)
	if len(rec) == 0 {
		return nil, fmt.Errorf("%w: empty record", ErrBadUpdate)
	}
	var raw []json.RawMessage
	if rec[0] == '[' {
		if err := json.Unmarshal(rec, &raw); err != nil {
			return nil, fmt.Errorf("%w: not a JSON array of updates: %v", ErrBadUpdate, err)
		}
		if len(raw) == 0 {
			return nil, fmt.Errorf("%w: empty array", ErrBadUpdate)
		}
		if len(raw) > MaxBatch {
			return nil, fmt.Errorf("%w: %d updates in one record, at most %d", ErrBadUpdate, len(raw), MaxBatch)
		}
	} else {
		raw = []json.RawMessage{rec}
	}
	out := make([]Update, len(raw))
	for i, r := range raw {
		u, err := decodeJSONUpdate(r)
		if err != nil {
			if len(raw) == 1 && rec[0] != '[' {
				return nil, fmt.Errorf("%w: %v", ErrBadUpdate, err)
			}
			return nil, fmt.Errorf("%w: update %d: %v", ErrBadUpdate, i, err)
		}
		out[i] = u
	}
	return out, nil
}

func decodeJSONUpdate(r json.RawMessage) (Update, error) {
	var j jsonUpdate
	d := json.NewDecoder(bytes.NewReader(r))
	d.DisallowUnknownFields()
	if err := d.Decode(&j); err != nil {
		return Update{}, fmt.Errorf("not an update object (op, src, dst, weight, label, time): %v", err)
	}
	if d.More() {
		return Update{}, errors.New("text after the update object")
	}
	var u Update
	switch j.Op {
	case "insert":
		u.Op = Insert
	case "delete":
		u.Op = Delete
	case "":
		return u, errors.New(`"op" is missing (insert or delete)`)
	default:
		return u, fmt.Errorf("op %q is neither insert nor delete", j.Op)
	}
	if j.Src == nil || j.Dst == nil {
		return u, errors.New(`"src" and "dst" are required`)
	}
	u.Src, u.Dst = int64(*j.Src), int64(*j.Dst)
	if j.Weight != nil {
		w := float32(*j.Weight)
		if !(w > 0) || math.IsInf(float64(w), 0) {
			return u, fmt.Errorf("weight %v must be finite and > 0 (as a float32)", *j.Weight)
		}
		u.Weight, u.Has = w, u.Has|HasWeight
	}
	if j.Label != nil {
		if *j.Label < 0 || *j.Label > 255 {
			return u, fmt.Errorf("label %d must be in [0, 255]", *j.Label)
		}
		u.Label, u.Has = uint8(*j.Label), u.Has|HasLabel
	}
	if j.Time != nil {
		u.Time, u.Has = int64(*j.Time), u.Has|HasTime
	}
	if u.Op == Delete && u.Has != 0 {
		return u, errors.New("a delete takes only src and dst (it removes every copy of the edge)")
	}
	return u, nil
}

// BinaryMagic starts a record in the binary batch form
// (docs/reference/messages.md, "Edge updates").
const BinaryMagic = "WSEU"

// binaryVersion is the batch form's version byte.
const binaryVersion = 1

// binaryHeader is the batch form's header length: magic, version, flags,
// two reserved bytes, the update count.
const binaryHeader = 12

// binaryFlags are the batch form's column flags, the Has bits.
const binaryFlags = HasWeight | HasLabel | HasTime

// binaryBytes is the length of a batch of n updates with the columns flags.
func binaryBytes(n int, flags uint8) int {
	per := 1 + 8 + 8
	if flags&HasWeight != 0 {
		per += 4
	}
	if flags&HasLabel != 0 {
		per++
	}
	if flags&HasTime != 0 {
		per += 8
	}
	return binaryHeader + n*per
}

// AppendBinary appends ups in the binary batch form to dst. The optional
// columns present are those any update carries; an update without a value
// of a present column writes 0 there, which reads back as not set for a
// delete and as the value 0 (weight: invalid) for an insert, so give every
// insert of a batch the same optional fields.
func AppendBinary(dst []byte, ups []Update) []byte {
	var flags uint8
	for _, u := range ups {
		flags |= u.Has
	}
	flags &= binaryFlags
	n := len(ups)
	dst = append(dst, BinaryMagic...)
	dst = append(dst, binaryVersion, flags, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(n))
	for _, u := range ups {
		dst = append(dst, byte(u.Op))
	}
	for _, u := range ups {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(u.Src))
	}
	for _, u := range ups {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(u.Dst))
	}
	if flags&HasWeight != 0 {
		for _, u := range ups {
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(u.Weight))
		}
	}
	if flags&HasLabel != 0 {
		for _, u := range ups {
			dst = append(dst, u.Label)
		}
	}
	if flags&HasTime != 0 {
		for _, u := range ups {
			dst = binary.LittleEndian.AppendUint64(dst, uint64(u.Time))
		}
	}
	return dst
}

// DecodeBinary reads a record in the binary batch form: a 12-byte header
// (BinaryMagic, version 1, column flags, two zero bytes, the update count
// as uint32) and then one column after the other, little-endian: ops (one
// byte each, 1 insert, 2 delete), src and dst (int64 each), and, when
// their flags are set, weights (float32), labels (uint8) and times (int64).
// A delete's weight, label and time must be 0.
func DecodeBinary(rec []byte) ([]Update, error) {
	return DecodeBinaryInto(nil, rec)
}

// DecodeBinaryInto is DecodeBinary appending to dst, so a reader can reuse
// one buffer from record to record.
func DecodeBinaryInto(dst []Update, rec []byte) ([]Update, error) {
	if len(rec) < binaryHeader || string(rec[:4]) != BinaryMagic {
		return dst, fmt.Errorf("%w: binary record of %d bytes has no %s header", ErrBadUpdate, len(rec), BinaryMagic)
	}
	if rec[4] != binaryVersion {
		return dst, fmt.Errorf("%w: binary record version %d, this reader knows %d", ErrBadUpdate, rec[4], binaryVersion)
	}
	flags := rec[5]
	if flags&^binaryFlags != 0 || rec[6] != 0 || rec[7] != 0 {
		return dst, fmt.Errorf("%w: binary record flags %#x (reserved %#x %#x): unknown bits set", ErrBadUpdate, flags, rec[6], rec[7])
	}
	n := int(binary.LittleEndian.Uint32(rec[8:]))
	if n == 0 || n > MaxBatch {
		return dst, fmt.Errorf("%w: binary record of %d updates, want 1 to %d", ErrBadUpdate, n, MaxBatch)
	}
	if want := binaryBytes(n, flags); len(rec) != want {
		return dst, fmt.Errorf("%w: binary record of %d updates with flags %#x is %d bytes, want %d", ErrBadUpdate, n, flags, len(rec), want)
	}
	base := len(dst)
	if cap(dst)-base < n {
		dst = append(dst[:cap(dst)], make([]Update, base+n-cap(dst))...)
	}
	dst = dst[:base+n]
	out := dst[base:]
	ops := rec[binaryHeader : binaryHeader+n]
	src := rec[binaryHeader+n : binaryHeader+9*n]
	dstc := rec[binaryHeader+9*n : binaryHeader+17*n]
	p := binaryHeader + 17*n
	for i := range out {
		op := Op(ops[i])
		if op != Insert && op != Delete {
			return dst[:base], fmt.Errorf("%w: update %d: op byte %d is neither 1 (insert) nor 2 (delete)", ErrBadUpdate, i, ops[i])
		}
		out[i] = Update{Op: op, Src: int64(binary.LittleEndian.Uint64(src[8*i:])), Dst: int64(binary.LittleEndian.Uint64(dstc[8*i:]))}
	}
	if flags&HasWeight != 0 {
		col := rec[p : p+4*n]
		p += 4 * n
		for i := range out {
			w := math.Float32frombits(binary.LittleEndian.Uint32(col[4*i:]))
			if out[i].Op == Delete {
				if w != 0 {
					return dst[:base], fmt.Errorf("%w: update %d: a delete's weight must be 0, got %v", ErrBadUpdate, i, w)
				}
				continue
			}
			if !(w > 0) || math.IsInf(float64(w), 0) {
				return dst[:base], fmt.Errorf("%w: update %d: weight %v must be finite and > 0", ErrBadUpdate, i, w)
			}
			out[i].Weight, out[i].Has = w, out[i].Has|HasWeight
		}
	}
	if flags&HasLabel != 0 {
		col := rec[p : p+n]
		p += n
		for i := range out {
			if out[i].Op == Delete {
				if col[i] != 0 {
					return dst[:base], fmt.Errorf("%w: update %d: a delete's label must be 0, got %d", ErrBadUpdate, i, col[i])
				}
				continue
			}
			out[i].Label, out[i].Has = col[i], out[i].Has|HasLabel
		}
	}
	if flags&HasTime != 0 {
		col := rec[p : p+8*n]
		for i := range out {
			t := int64(binary.LittleEndian.Uint64(col[8*i:]))
			if out[i].Op == Delete {
				if t != 0 {
					return dst[:base], fmt.Errorf("%w: update %d: a delete's time must be 0, got %d", ErrBadUpdate, i, t)
				}
				continue
			}
			out[i].Time, out[i].Has = t, out[i].Has|HasTime
		}
	}
	return dst, nil
}
