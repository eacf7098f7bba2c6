package config

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Every variable of Config has a meaning in the generated reference, and
// every field comment names the variable its tag reads: a new variable
// cannot ship undocumented, nor a comment describe another variable.
func TestConfigDocCoversEveryVariable(t *testing.T) {
	ref := configReference()
	ct := reflect.TypeFor[Config]()
	if len(ref) != ct.NumField() {
		t.Fatalf("%d variables documented, Config has %d fields", len(ref), ct.NumField())
	}
	for i, v := range ref {
		if v.Doc == "" {
			t.Errorf("%s (Config.%s) has no doc comment in config.go", v.Name, ct.Field(i).Name)
		}
		if v.Section == "" {
			t.Errorf("%s is under no \"// ---- Section ----\" heading", v.Name)
		}
	}

	f, err := parser.ParseFile(token.NewFileSet(), "config.go", configSource, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]string{}
	for i := range ct.NumField() {
		name, _, _ := strings.Cut(ct.Field(i).Tag.Get("env"), ",")
		tags[ct.Field(i).Name] = EnvPrefix + name
	}
	seen := 0
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		for _, field := range ts.Type.(*ast.StructType).Fields.List {
			for _, name := range field.Names {
				seen++
				want, ok := tags[name.Name]
				if !ok {
					t.Errorf("Config.%s is in config.go but not in the compiled Config", name.Name)
					continue
				}
				got := ""
				if field.Doc != nil {
					got = fieldDocName(field.Doc.Text())
				}
				if got != want {
					t.Errorf("Config.%s reads %s but its comment starts with %q; write \"// %s: meaning\"", name.Name, want, got, want)
				}
			}
		}
		return false
	})
	if seen != ct.NumField() {
		t.Errorf("config.go declares %d fields in Config, the compiled Config has %d (is the embedded file stale?)", seen, ct.NumField())
	}
}

func TestConfigDocReferenceText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReference(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nKafka\n",
		"  WALKSTAGE_BROKERS  (no default)\n      comma-separated bootstrap brokers, host:port. Required.\n",
		"  WALKSTAGE_INPUT_TOPIC  default walkstage-requests\n      topic of seed-batch requests (key = batch id).\n",
		"\nOperations\n",
		"  WALKSTAGE_LOG_FORMAT  default json\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("reference lacks %q:\n%s", want, b.String())
		}
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if len(line) > 100 {
			t.Errorf("line of %d characters: %q", len(line), line)
		}
	}
}

// TestConfigurationMarkdown: docs/reference/configuration.md is what
// WriteMarkdown prints from stage/config/config.go, so the reference never
// drifts from the code (WALKSTAGE_UPDATE_DOCS=1 rewrites it).
func TestConfigurationMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "docs", "reference", "configuration.md")
	if os.Getenv("WALKSTAGE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s is not what stage/config/config.go says: regenerate it with WALKSTAGE_UPDATE_DOCS=1 go test ./stage/config -run TestConfigurationMarkdown", path)
	}
}
