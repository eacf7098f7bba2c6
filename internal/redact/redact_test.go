package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"s3://alice:hunter2@walks/graphs/g.wsg?region=eu-west-1", "s3://alice:xxxxx@walks/graphs/g.wsg?region=eu-west-1"},
		{"https://ghp_token123@example.com/g.wsg", "https://xxxxx@example.com/g.wsg"},
		{"file:///srv/graphs/g.wsg", "file:///srv/graphs/g.wsg"},
		{"s3://walks?endpoint=http://127.0.0.1:9000&use_path_style=true", "s3://walks?endpoint=http://127.0.0.1:9000&use_path_style=true"},
		// Query secrets, whatever their case, in order and otherwise untouched.
		{"https://h/o?X-Amz-Algorithm=AWS4&X-Amz-Credential=AKIA%2F2024&X-Amz-Signature=abc&X-Amz-Security-Token=t",
			"https://h/o?X-Amz-Algorithm=AWS4&X-Amz-Credential=xxxxx&X-Amz-Signature=xxxxx&X-Amz-Security-Token=xxxxx"},
		{"azblob://c?sv=2020&sig=s1gn&se=2030", "azblob://c?sv=2020&sig=xxxxx&se=2030"},
		{"s3://b?password=p&secret=s&token=t&key=k&access_key_id=a&region=r#frag",
			"s3://b?password=xxxxx&secret=xxxxx&token=xxxxx&key=xxxxx&access_key_id=xxxxx&region=r#frag"},
		// A URL nested in a query value, raw and escaped.
		{"s3://walks?endpoint=http://u:pw@minio:9000&region=r", "s3://walks?endpoint=http://u:xxxxx@minio:9000&region=r"},
		{"s3://walks?endpoint=" + url.QueryEscape("http://u:pw@minio:9000"), "s3://walks?endpoint=" + url.QueryEscape("http://u:xxxxx@minio:9000")},
		// URLs inside error text, quoted or not.
		{`open bucket "s3://a:b@walks?token=t": unknown query parameter "token"`,
			`open bucket "s3://a:xxxxx@walks?token=xxxxx": unknown query parameter "token"`},
		{"graph s3://a:b@walks/g.wsg: 403, retry", "graph s3://a:xxxxx@walks/g.wsg: 403, retry"},
		// A broker address without a scheme.
		{`WALKSTAGE_BROKERS: "alice:s3cret@kafka:9092" is not host:port`, `WALKSTAGE_BROKERS: "alice:xxxxx@kafka:9092" is not host:port`},
		{"alice:s3cret@kafka:9092,bob:pw@kafka2:9092", "alice:xxxxx@kafka:9092,bob:xxxxx@kafka2:9092"},
		// Nothing to mask.
		{"batch succeeded", "batch succeeded"},
		{"kafka:9092", "kafka:9092"},
		{"a=b c=d", "a=b c=d"},
		{"someone@example.com", "someone@example.com"},
	} {
		if got := String(c.in); got != c.want {
			t.Errorf("String(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	err := Error(fmt.Errorf("graph s3://a:pw@b/g.wsg: %w", fs.ErrNotExist))
	if strings.Contains(err.Error(), "pw") || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%v (is ErrNotExist: %v)", err, errors.Is(err, fs.ErrNotExist))
	}
	if Error(nil) != nil {
		t.Fatal("Error(nil) is not nil")
	}
}

func TestHandlerMasksEveryValue(t *testing.T) {
	var buf bytes.Buffer
	log := Logger(slog.New(slog.NewJSONHandler(&buf, nil)))
	if Logger(log) != log {
		t.Error("a redacting logger was wrapped again")
	}
	u, _ := url.Parse("s3://u:pw1@b")
	log.With("with", "s3://u:pw2@b").WithGroup("g").Info("open s3://u:pw3@b",
		"s", "s3://u:pw4@b", "err", errors.New("dial s3://u:pw5@b"), "url", u,
		"brokers", []string{"u:pw6@k:9092"}, slog.Group("inner", "s", "s3://b?token=pw7"))
	out := buf.String()
	for i := 1; i <= 7; i++ {
		if strings.Contains(out, fmt.Sprintf("pw%d", i)) {
			t.Errorf("pw%d logged: %s", i, out)
		}
	}
	if strings.Count(out, Mask) != 7 {
		t.Errorf("want 7 masks: %s", out)
	}
}
