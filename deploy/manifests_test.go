package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir    = "../helm/walkstage"
	releaseName = "ws"
	namespace   = "walkstage"
	envPrefix   = "WALKSTAGE_"
	// helmInstall is the pinned helm that CI installs (HELM_VERSION in scripts/lib.sh).
	helmInstall = "go install helm.sh/helm/v3/cmd/helm@v3.22.0"
)

// chartManaged are the WALKSTAGE_* variables the chart derives from other
// values instead of a key under config: (see values.yaml).
var chartManaged = map[string]string{
	"TLS_CA_FILE":        "kafka.tls.existingSecret + caKey",
	"TLS_CERT_FILE":      "kafka.tls.existingSecret + certKey",
	"TLS_KEY_FILE":       "kafka.tls.existingSecret + keyKey",
	"SASL_PASSWORD":      "kafka.sasl.existingSecret + passwordKey",
	"GRAPH_DOWNLOAD_DIR": "graph.downloadDir",
	"METRICS_ADDR":       "metrics.port",
	"SHUTDOWN_TIMEOUT":   "shutdownTimeoutSeconds",
}

// secretEnv are variables that may only come from a Secret, never a literal.
var secretEnv = []string{"WALKSTAGE_SASL_PASSWORD", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
	"AWS_SESSION_TOKEN", "AZURE_STORAGE_KEY"}

// configVar is one WALKSTAGE_* variable as stage/config/config.go declares it.
type configVar struct {
	Name    string // without the prefix
	Default string // envDefault, "" when none
}

// configVariables parses stage/config/config.go's Config struct tags (the
// variables' single source of truth) without importing the stage.
func configVariables(t *testing.T) []configVar {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../stage/config/config.go", nil, 0)
	if err != nil {
		t.Fatalf("parse stage/config/config.go: %v", err)
	}
	var vars []configVar
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			t.Fatal("config.Config is not a struct")
		}
		for _, field := range st.Fields.List {
			if field.Tag == nil {
				continue
			}
			tag := reflect.StructTag(strings.Trim(field.Tag.Value, "`"))
			name, _, _ := strings.Cut(tag.Get("env"), ",")
			if name == "" {
				continue
			}
			vars = append(vars, configVar{Name: name, Default: tag.Get("envDefault")})
		}
		return false
	})
	if len(vars) < 10 {
		t.Fatalf("found only %d env tags in stage/config/config.go's Config", len(vars))
	}
	return vars
}

// readYAML reads a YAML file into generic JSON values (numbers are float64,
// as Helm sees them).
func readYAML(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return m
}

// lookup walks a dotted path through nested maps.
func lookup(m map[string]any, path string) any {
	var v any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = mm[k]
	}
	return v
}

// envString formats a values entry the way the chart renders it.
func envString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case float64:
		return strconv.FormatInt(int64(x), 10)
	case []any:
		parts := make([]string, len(x))
		for i, p := range x {
			parts[i] = envString(p)
		}
		return strings.Join(parts, ",")
	case string:
		return x
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

// helmPath finds the helm CLI: PATH, ./bin, then $(go env GOPATH)/bin. Missing helm
// skips the test, or fails it where WALKSTAGE_REQUIRE_HELM=1 (CI).
func helmPath(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	// scripts/lib.sh's ensure_tools installs the pinned helm into ./bin.
	if p, err := filepath.Abs("../bin/helm"); err == nil {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "helm")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("WALKSTAGE_REQUIRE_HELM") == "1" {
		t.Fatalf("helm is not on PATH nor in $(go env GOPATH)/bin and WALKSTAGE_REQUIRE_HELM=1; install it with: %s", helmInstall)
	}
	t.Skipf("helm not found; install it with %q (WALKSTAGE_REQUIRE_HELM=1 makes this a failure)", helmInstall)
	return ""
}

// runHelm runs helm with args and returns stdout, or an error carrying stderr.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmPath(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// No kubeconfig, no repository cache from the user's machine.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "kubeconfig"))
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(strings.TrimSpace(stderr.String() + "\n" + err.Error()))
	}
	return stdout.String(), nil
}

// renderArgs is `helm template` of the chart with the given values files.
func renderArgs(valuesFiles ...string) []string {
	args := []string{"template", releaseName, chartDir, "--namespace", namespace}
	for _, f := range valuesFiles {
		args = append(args, "--values", f)
	}
	return args
}

// ---- The custom resources the chart emits, as far as it fills them ----

type scaledObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		Triggers        []struct {
			Type string `json:"type"`
			// KEDA takes only strings here.
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

type triggerAuthentication struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
		Env []struct {
			Parameter     string `json:"parameter"`
			Name          string `json:"name"`
			ContainerName string `json:"containerName"`
		} `json:"env"`
	} `json:"spec"`
}

type serviceMonitor struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta `json:"metadata"`
	Spec            struct {
		Selector  metav1.LabelSelector `json:"selector"`
		Endpoints []struct {
			Port          string `json:"port"`
			Path          string `json:"path"`
			Interval      string `json:"interval"`
			ScrapeTimeout string `json:"scrapeTimeout"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// rendered holds one render of the chart, each manifest decoded strictly.
type rendered struct {
	Deployment            *appsv1.Deployment
	Service               *corev1.Service
	ServiceAccount        *corev1.ServiceAccount
	PodDisruptionBudget   *policyv1.PodDisruptionBudget
	ScaledObject          *scaledObject
	TriggerAuthentication *triggerAuthentication
	ServiceMonitor        *serviceMonitor
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decodeManifests splits helm's output into documents and decodes each into
// its API type, rejecting unknown fields, unknown kinds and duplicates.
func decodeManifests(t *testing.T, out string) *rendered {
	t.Helper()
	r := &rendered{}
	for i, doc := range docSeparator.Split(out, -1) {
		js, err := yaml.YAMLToJSONStrict([]byte(doc))
		if err != nil {
			t.Fatalf("document %d is not valid YAML: %v\n%s", i, err, doc)
		}
		if s := string(bytes.TrimSpace(js)); s == "null" || s == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var into any
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 Deployment":
			into = setOnce(t, &r.Deployment)
		case "v1 Service":
			into = setOnce(t, &r.Service)
		case "v1 ServiceAccount":
			into = setOnce(t, &r.ServiceAccount)
		case "policy/v1 PodDisruptionBudget":
			into = setOnce(t, &r.PodDisruptionBudget)
		case "keda.sh/v1alpha1 ScaledObject":
			into = setOnce(t, &r.ScaledObject)
		case "keda.sh/v1alpha1 TriggerAuthentication":
			into = setOnce(t, &r.TriggerAuthentication)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			into = setOnce(t, &r.ServiceMonitor)
		default:
			t.Fatalf("document %d: unexpected %s %s (add it to decodeManifests and its checks)", i, tm.APIVersion, tm.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s %s does not decode strictly: %v\n%s", tm.APIVersion, tm.Kind, err, doc)
		}
		if dec.More() {
			t.Fatalf("%s %s: trailing data", tm.APIVersion, tm.Kind)
		}
	}
	if r.Deployment == nil || r.Service == nil {
		t.Fatalf("render has no Deployment or Service:\n%s", out)
	}
	return r
}

// setOnce allocates *p for decoding, failing if the kind appeared before.
func setOnce[T any](t *testing.T, p **T) *T {
	t.Helper()
	if *p != nil {
		t.Fatalf("two %T manifests in one render", *p)
	}
	*p = new(T)
	return *p
}
