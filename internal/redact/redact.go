// Package redact masks credentials in URLs, and in any text that quotes
// them, before the text reaches a log, an error, a readiness body or a
// metric label. Operators put credentials in the stage's URLs (userinfo in
// a graph or catalog URL, signed query parameters, a SASL user in a broker
// address), and the same URLs come back inside errors of the libraries
// that open them (gocloud, the AWS SDK), so masking where a URL is first
// printed is not enough: String is applied to the finished text as well.
//
// It knows nothing of the stage; it must stay cheap on text without '@'
// or '=' (every log line passes through it).
package redact

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces a secret.
const Mask = "xxxxx"

var (
	// urlRE finds scheme://... up to whitespace or a quoting character.
	urlRE = regexp.MustCompile("[A-Za-z][A-Za-z0-9+.-]*://[^\\s\"'<>`]+")
	// hostUserRE finds user:password@ without a scheme, as in a broker
	// address "alice:secret@kafka:9092" (the group before it keeps the
	// separator that starts the address).
	hostUserRE = regexp.MustCompile(`(^|[\s,;"'(\[=])([^\s,;"'@/:\[\]()]+):([^\s,;"'@/]+)@`)
)

// secretKeys are the parts of a query parameter's name that make its value
// a secret: passwords, tokens, keys, SAS and SigV4 signatures and
// credentials, session tokens.
var secretKeys = []string{"pass", "pwd", "secret", "token", "key", "signature", "credential", "auth", "session"}

// String returns s with every credential it can find masked: the password
// of a URL's userinfo (a user without a password is masked whole, as
// tokens are often passed that way), the values of query parameters named
// like secrets (password, secret, token, key, X-Amz-Signature, sig, ...),
// also inside a URL nested in a query value, and user:password@ in a
// host:port without a scheme. The rest of s is kept byte for byte.
func String(s string) string {
	if !strings.ContainsAny(s, "@=") {
		return s
	}
	if strings.Contains(s, "://") {
		s = urlRE.ReplaceAllStringFunc(s, redactURL)
	}
	if strings.Contains(s, "@") {
		s = hostUserRE.ReplaceAllStringFunc(s, func(m string) string {
			sub := hostUserRE.FindStringSubmatch(m)
			if sub[3] == Mask {
				return m // already masked by redactURL
			}
			return sub[1] + sub[2] + ":" + Mask + "@"
		})
	}
	return s
}

// redactURL masks one scheme://authority/path?query#fragment. It works on
// the text rather than on url.Parse's result, which would re-encode what
// it keeps and fails on some of what operators type.
func redactURL(raw string) string {
	i := strings.Index(raw, "://") + len("://")
	rest := raw[i:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		user, _, hasPass := strings.Cut(authority[:at], ":")
		if hasPass {
			authority = user + ":" + Mask + authority[at:]
		} else {
			authority = Mask + authority[at:]
		}
	}
	tail := rest[end:]
	q := strings.IndexByte(tail, '?')
	if q < 0 {
		return raw[:i] + authority + tail
	}
	query, frag := tail[q+1:], ""
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	return raw[:i] + authority + tail[:q+1] + redactQuery(query) + frag
}

// redactQuery masks the secret values of a raw query, keeping its order
// and encoding.
func redactQuery(query string) string {
	params := strings.Split(query, "&")
	for j, p := range params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || v == "" {
			continue
		}
		if name, err := url.QueryUnescape(k); err == nil && secretName(name) {
			params[j] = k + "=" + Mask
			continue
		}
		// A value may itself be a URL with credentials (an S3 endpoint).
		if !strings.Contains(v, "%") {
			params[j] = k + "=" + String(v)
		} else if u, err := url.QueryUnescape(v); err == nil {
			if r := String(u); r != u {
				params[j] = k + "=" + url.QueryEscape(r)
			}
		}
	}
	return strings.Join(params, "&")
}

func secretName(name string) bool {
	n := strings.ToLower(name)
	if n == "sig" { // Azure SAS
		return true
	}
	for _, s := range secretKeys {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// Error is err with its message passed through String; errors.Is and
// errors.As still see err. Nil stays nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return &redacted{err: err}
}

type redacted struct{ err error }

func (r *redacted) Error() string { return String(r.err.Error()) }
func (r *redacted) Unwrap() error { return r.err }

// Handler wraps h so that every record's message and attribute values
// pass through String: strings, errors, string lists and URLs, in groups
// too. A handler that already redacts is returned as it is.
func Handler(h slog.Handler) slog.Handler {
	if _, ok := h.(*handler); ok {
		return h
	}
	return &handler{h: h}
}

// Logger is l with its handler wrapped by Handler.
func Logger(l *slog.Logger) *slog.Logger {
	if _, ok := l.Handler().(*handler); ok {
		return l
	}
	return slog.New(Handler(l.Handler()))
}

type handler struct{ h slog.Handler }

func (h *handler) Enabled(ctx context.Context, l slog.Level) bool { return h.h.Enabled(ctx, l) }

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		nr.AddAttrs(attr(a))
		return true
	})
	return h.h.Handle(ctx, nr)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = attr(a)
	}
	return &handler{h: h.h.WithAttrs(out)}
}

func (h *handler) WithGroup(name string) slog.Handler { return &handler{h: h.h.WithGroup(name)} }

func attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if s := v.String(); strings.ContainsAny(s, "@=") {
			return slog.String(a.Key, String(s))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = attr(ga)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	case slog.KindAny:
		switch x := v.Any().(type) {
		case error:
			// JSON and text handlers print an error as its message.
			return slog.String(a.Key, String(x.Error()))
		case *url.URL:
			if x != nil {
				return slog.String(a.Key, String(x.String()))
			}
		case []string:
			out := make([]string, len(x))
			for i, s := range x {
				out[i] = String(s)
			}
			return slog.Any(a.Key, out)
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
