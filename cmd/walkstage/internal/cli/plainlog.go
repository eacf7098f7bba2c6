package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/walkstage/walkstage/internal/logkeys"
)

// plainHandler writes a command's log records in the format of its other
// stderr lines, one stream, one format: the message, then its attributes
// in brackets, with "warning: " or "error: " before records of those
// levels (and "debug: " before debug ones). The stage (walkstage run)
// logs JSON or slog text for machines; these lines are for the person
// running a command.
type plainHandler struct {
	w      io.Writer
	level  slog.Leveler
	mu     *sync.Mutex
	attrs  []slog.Attr
	prefix string // of the open groups, "a.b."
}

func newPlainHandler(w io.Writer, level slog.Leveler) *plainHandler {
	return &plainHandler{w: w, level: level, mu: new(sync.Mutex)}
}

func (h *plainHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level.Level() }

func (h *plainHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	switch {
	case r.Level >= slog.LevelError:
		b.WriteString("error: ")
	case r.Level >= slog.LevelWarn:
		b.WriteString("warning: ")
	case r.Level < slog.LevelInfo:
		b.WriteString("debug: ")
	}
	b.WriteString(r.Message)
	var kv []string
	add := func(prefix string, a slog.Attr) {
		a = logkeys.Seconds(nil, a)
		a.Value = a.Value.Resolve()
		if a.Equal(slog.Attr{}) {
			return
		}
		v := a.Value.String()
		if strings.ContainsAny(v, " \t\n\"=") || v == "" {
			v = strconv.Quote(v)
		}
		kv = append(kv, prefix+a.Key+"="+v)
	}
	for _, a := range h.attrs {
		add("", a)
	}
	r.Attrs(func(a slog.Attr) bool {
		add(h.prefix, a)
		return true
	})
	if len(kv) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(kv, ", "))
	}
	b.WriteByte('\n')
	h.mu.Lock()
	defer h.mu.Unlock()
	_, err := io.WriteString(h.w, b.String())
	return err
}

func (h *plainHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]slog.Attr(nil), h.attrs...)
	for _, a := range as {
		a.Key = h.prefix + a.Key
		c.attrs = append(c.attrs, a)
	}
	return &c
}

func (h *plainHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}
