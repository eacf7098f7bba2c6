package config

import (
	_ "embed"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"reflect"
	"strings"
	"sync"
)

// The configuration reference (`walkstage run -h`, docs) is generated from
// Config itself: names and defaults from its struct tags, meanings from
// the field comments in config.go. The source is embedded because the
// comments exist only there, and the image ships no source; one place to
// document a variable means the help cannot drift from the code.
//
//go:embed config.go
var configSource []byte

// configVar documents one configuration variable.
type configVar struct {
	Name    string // WALKSTAGE_...
	Default string // envDefault; empty when there is none
	Doc     string // the field's comment, without the leading "WALKSTAGE_X:"
	Section string // the "---- Section ----" comment above it, if any
}

// configReference lists every variable of Config, in declaration order,
// with its default and meaning.
func configReference() []configVar {
	docs, sections := configDocs()
	vars := Variables()
	out := make([]configVar, len(vars))
	t := reflect.TypeFor[Config]()
	for i, v := range vars {
		f := t.Field(i).Name
		out[i] = configVar{Name: v.Name, Default: v.Default, Doc: docs[f], Section: sections[f]}
	}
	return out
}

// WriteReference prints configReference for a terminal: a heading per
// section, each variable with its default and its meaning wrapped below it.
func WriteReference(w io.Writer) error {
	section := ""
	for _, v := range configReference() {
		if v.Section != section && v.Section != "" {
			section = v.Section
			if _, err := fmt.Fprintf(w, "\n%s\n", section); err != nil {
				return err
			}
		}
		def := "(no default)"
		if v.Default != "" {
			def = "default " + v.Default
		}
		fmt.Fprintf(w, "  %s  %s\n", v.Name, def)
		for _, line := range wrapWords(v.Doc, 72) {
			fmt.Fprintf(w, "      %s\n", line)
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}

// WriteMarkdown prints configReference as the Markdown page
// docs/reference/configuration.md holds (a test keeps the two equal): a
// table per section.
func WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# Configuration reference\n\n")
	b.WriteString("`walkstage run` reads these environment variables (`walkstage run -h` prints the same). A bad\n")
	b.WriteString("configuration is reported all at once at start-up. Generated from `stage/config/config.go` by\n")
	b.WriteString("`WALKSTAGE_UPDATE_DOCS=1 go test ./stage/config -run TestConfigurationMarkdown`; the OpenTelemetry\n")
	b.WriteString("`OTEL_*` variables are in [messages.md](messages.md#tracing).\n")
	section := "\x00"
	for _, v := range configReference() {
		if v.Section != section {
			section = v.Section
			title := section
			if title == "" {
				title = "General"
			}
			fmt.Fprintf(&b, "\n## %s\n\n| variable | default | meaning |\n|---|---|---|\n", title)
		}
		def := ""
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", v.Name, def, strings.ReplaceAll(v.Doc, "|", "\\|"))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var configDocsOnce = sync.OnceValues(parseConfigDocs)

// configDocs maps Config's field names to their documentation and section.
func configDocs() (docs, sections map[string]string) { return configDocsOnce() }

func parseConfigDocs() (docs, sections map[string]string) {
	docs, sections = map[string]string{}, map[string]string{}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "config.go", configSource, parser.ParseComments)
	if err != nil {
		return docs, sections // the test catches this; the help then lacks meanings
	}
	var st *ast.StructType
	ast.Inspect(f, func(n ast.Node) bool {
		if ts, ok := n.(*ast.TypeSpec); ok && ts.Name.Name == "Config" {
			st, _ = ts.Type.(*ast.StructType)
			return false
		}
		return st == nil
	})
	if st == nil {
		return docs, sections
	}
	// Section headings are free-standing comments "// ---- Kafka ----"
	// inside the struct; each field belongs to the last one above it.
	type heading struct {
		pos  token.Pos
		text string
	}
	var heads []heading
	for _, cg := range f.Comments {
		if cg.Pos() < st.Pos() || cg.End() > st.End() {
			continue
		}
		t := strings.TrimSpace(cg.Text())
		if strings.HasPrefix(t, "----") {
			heads = append(heads, heading{cg.Pos(), strings.TrimSpace(strings.Trim(t, "-"))})
		}
	}
	for _, field := range st.Fields.List {
		for _, name := range field.Names {
			if field.Doc != nil {
				docs[name.Name] = fieldDoc(field.Doc.Text())
			}
			for _, h := range heads {
				if h.pos < field.Pos() {
					sections[name.Name] = h.text
				}
			}
		}
	}
	return docs, sections
}

// fieldDoc joins a field comment into one paragraph; the name it starts
// with ("WALKSTAGE_X: ...") is kept apart by the caller's check, so strip it.
func fieldDoc(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if name, rest, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(name, EnvPrefix) && !strings.Contains(name, " ") {
		return rest
	}
	return s
}

// fieldDocName returns the variable name a field comment starts with.
func fieldDocName(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if name, _, ok := strings.Cut(s, ": "); ok && strings.HasPrefix(name, EnvPrefix) && !strings.Contains(name, " ") {
		return name
	}
	return ""
}

func wrapWords(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
