package deploy

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

const gpuResource corev1.ResourceName = "nvidia.com/gpu"

// TestValuesCoverConfig needs no helm: every variable of stage/config/config.go is
// either a key under config: in values.yaml (with the binary's default) or
// one the chart derives, and the schema knows exactly those keys.
func TestValuesCoverConfig(t *testing.T) {
	vars := configVariables(t)
	values := readYAML(t, filepath.Join(chartDir, "values.yaml"))
	config, _ := values["config"].(map[string]any)
	if config == nil {
		t.Fatal("values.yaml has no config map")
	}
	known := map[string]bool{}
	for _, v := range vars {
		known[v.Name] = true
		if where, ok := chartManaged[v.Name]; ok {
			if _, dup := config[v.Name]; dup {
				t.Errorf("config.%s is in values.yaml, but the chart sets %s%s from %s", v.Name, envPrefix, v.Name, where)
			}
			continue
		}
		got, ok := config[v.Name]
		if !ok {
			t.Errorf("%s%s (stage/config/config.go) has no config.%s in values.yaml", envPrefix, v.Name, v.Name)
			continue
		}
		if s := envString(got); s != v.Default {
			t.Errorf("values.yaml config.%s = %q, but the binary's default is %q", v.Name, s, v.Default)
		}
	}
	for k := range config {
		if !known[k] {
			t.Errorf("values.yaml config.%s is not a variable of stage/config/config.go", k)
		}
	}
	for k := range chartManaged {
		if !known[k] {
			t.Errorf("chartManaged lists %s, which stage/config/config.go no longer has", k)
		}
	}
	// The chart-derived defaults agree with the binary's too.
	defaults := map[string]string{}
	for _, v := range vars {
		defaults[v.Name] = v.Default
	}
	// The chart binds every interface of the pod on metrics.port (the
	// kubelet's probes and Prometheus come from outside it); the binary's
	// default is the same port on loopback only.
	if got, want := "127.0.0.1:"+envString(lookup(values, "metrics.port")), defaults["METRICS_ADDR"]; got != want {
		t.Errorf("metrics.port is the port of %q, binary default %q", got, want)
	}
	if got := envString(lookup(values, "shutdownTimeoutSeconds")) + "s"; got != defaults["SHUTDOWN_TIMEOUT"] {
		t.Errorf("shutdownTimeoutSeconds gives SHUTDOWN_TIMEOUT %q, binary default %q", got, defaults["SHUTDOWN_TIMEOUT"])
	}

	var schema struct {
		Properties struct {
			Config struct {
				AdditionalProperties *bool                      `json:"additionalProperties"`
				Properties           map[string]json.RawMessage `json:"properties"`
			} `json:"config"`
		} `json:"properties"`
	}
	b, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &schema); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	sc := schema.Properties.Config
	if sc.AdditionalProperties == nil || *sc.AdditionalProperties {
		t.Error("values.schema.json must reject unknown config keys (additionalProperties: false)")
	}
	for k := range config {
		if _, ok := sc.Properties[k]; !ok {
			t.Errorf("values.schema.json has no config.%s", k)
		}
	}
	for k := range sc.Properties {
		if _, ok := config[k]; !ok {
			t.Errorf("values.schema.json allows config.%s, which values.yaml lacks", k)
		}
	}
}

func TestChartLints(t *testing.T) {
	for _, f := range []string{"", "testdata/all-settings.yaml", "testdata/cpu-only.yaml", "testdata/keda-sasl-user-secret.yaml"} {
		args := []string{"lint", "--strict", chartDir, "--namespace", namespace}
		if f != "" {
			args = append(args, "--values", f)
		}
		if out, err := runHelm(t, args...); err != nil {
			t.Errorf("helm lint %s: %v\n%s", f, err, out)
		}
	}
}

// TestChartDefaults renders the default values: the GPU image on GPU nodes,
// the binary's defaults, nothing optional.
func TestChartDefaults(t *testing.T) {
	out, err := runHelm(t, renderArgs()...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeManifests(t, out)
	checkWorkload(t, r, true)
	if r.ScaledObject != nil || r.ServiceMonitor != nil || r.PodDisruptionBudget != nil || r.TriggerAuthentication != nil {
		t.Error("an optional manifest renders with the default values")
	}
	if r.Deployment.Spec.Replicas == nil || *r.Deployment.Spec.Replicas != 1 {
		t.Errorf("replicas = %v, want 1", r.Deployment.Spec.Replicas)
	}
	env := containerEnv(t, r)
	for _, v := range configVariables(t) {
		e, ok := env[envPrefix+v.Name]
		if _, derived := chartManaged[v.Name]; !ok || derived {
			continue // unset (no default), or derived from other values
		}
		if e.ValueFrom == nil && e.Value != v.Default {
			t.Errorf("%s%s renders as %q, the binary's default is %q", envPrefix, v.Name, e.Value, v.Default)
		}
	}
	if r.ServiceAccount == nil || r.ServiceAccount.AutomountServiceAccountToken == nil || *r.ServiceAccount.AutomountServiceAccountToken {
		t.Error("the service account must exist and not automount its token")
	}
}

// TestChartAllSettings renders every setting and every optional feature.
func TestChartAllSettings(t *testing.T) {
	const file = "testdata/all-settings.yaml"
	out, err := runHelm(t, renderArgs(file)...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeManifests(t, out)
	checkWorkload(t, r, true)
	values := readYAML(t, file)
	env := containerEnv(t, r)

	// Every variable of stage/config/config.go is set, with the value from the file.
	for _, v := range configVariables(t) {
		name := envPrefix + v.Name
		e, ok := env[name]
		if !ok {
			t.Errorf("%s is not set by the chart with %s", name, file)
			continue
		}
		if want := lookup(values, "config."+v.Name); want != nil && e.Value != envString(want) {
			t.Errorf("%s = %q, want %q from %s", name, e.Value, envString(want), file)
		}
	}
	wantSecret := map[string][2]string{
		"WALKSTAGE_SASL_PASSWORD": {"kafka-sasl", "password"},
		"AWS_ACCESS_KEY_ID":       {"walks-s3", "AWS_ACCESS_KEY_ID"},
		"AWS_SECRET_ACCESS_KEY":   {"walks-s3", "AWS_SECRET_ACCESS_KEY"},
		"AWS_SESSION_TOKEN":       {"walks-s3", "AWS_SESSION_TOKEN"},
		"AZURE_STORAGE_ACCOUNT":   {"azblob-key", "AZURE_STORAGE_ACCOUNT"},
		"AZURE_STORAGE_KEY":       {"azblob-key", "AZURE_STORAGE_KEY"},
	}
	for name, ref := range wantSecret {
		e := env[name]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != ref[0] || e.ValueFrom.SecretKeyRef.Key != ref[1] {
			t.Errorf("%s should come from secretKeyRef %s/%s, got %+v", name, ref[0], ref[1], e)
		}
	}
	if got := env["WALKSTAGE_SHUTDOWN_TIMEOUT"].Value; got != "90s" {
		t.Errorf("WALKSTAGE_SHUTDOWN_TIMEOUT = %q, want 90s", got)
	}
	if got := *r.Deployment.Spec.Template.Spec.TerminationGracePeriodSeconds; got != 120 {
		t.Errorf("terminationGracePeriodSeconds = %d, want 120", got)
	}
	pod := r.Deployment.Spec.Template.Spec
	for _, file := range []string{"WALKSTAGE_TLS_CA_FILE", "WALKSTAGE_TLS_CERT_FILE", "WALKSTAGE_TLS_KEY_FILE", "GOOGLE_APPLICATION_CREDENTIALS"} {
		checkSecretFile(t, pod, env[file].Value, file)
	}
	if env["AWS_REGION"].Value != "eu-west-1" {
		t.Errorf("AWS_REGION = %q", env["AWS_REGION"].Value)
	}
	if pod.RuntimeClassName == nil || *pod.RuntimeClassName != "nvidia" {
		t.Errorf("runtimeClassName = %v, want nvidia", pod.RuntimeClassName)
	}
	if pod.NodeSelector["pool"] != "walkers" || !slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == "dedicated" }) {
		t.Errorf("user nodeSelector/tolerations lost next to the GPU ones: %v %v", pod.NodeSelector, pod.Tolerations)
	}
	if a := r.ServiceAccount.Annotations["eks.amazonaws.com/role-arn"]; a == "" {
		t.Error("serviceAccount.annotations are not on the ServiceAccount")
	}
	graphMount := false
	for _, v := range pod.Volumes {
		if v.Name == "graph" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "web-graph" {
			graphMount = true
		}
	}
	if !graphMount {
		t.Error("graph.volume.existingClaim is not mounted")
	}

	// KEDA: replicas left to the ScaledObject, bounded by the partitions.
	if r.Deployment.Spec.Replicas != nil {
		t.Errorf("replicas = %d with KEDA on; KEDA owns the count", *r.Deployment.Spec.Replicas)
	}
	so := r.ScaledObject
	if so == nil {
		t.Fatal("keda.enabled renders no ScaledObject")
	}
	partitions := int32(lookup(values, "keda.partitions").(float64))
	if so.Spec.MaxReplicaCount == nil || *so.Spec.MaxReplicaCount > partitions || *so.Spec.MaxReplicaCount < 1 {
		t.Errorf("maxReplicaCount = %v, want 1..%d (partitions)", so.Spec.MaxReplicaCount, partitions)
	}
	if so.Spec.MinReplicaCount == nil || *so.Spec.MinReplicaCount != 2 {
		t.Errorf("minReplicaCount = %v, want 2", so.Spec.MinReplicaCount)
	}
	if ref := so.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != r.Deployment.Name {
		t.Errorf("scaleTargetRef = %+v, want Deployment %s", ref, r.Deployment.Name)
	}
	if len(so.Spec.Triggers) != 1 || so.Spec.Triggers[0].Type != "kafka" {
		t.Fatalf("triggers = %+v, want one kafka trigger", so.Spec.Triggers)
	}
	trig := so.Spec.Triggers[0]
	for k, want := range map[string]string{
		"bootstrapServers":   env["WALKSTAGE_BROKERS"].Value,
		"consumerGroup":      env["WALKSTAGE_GROUP"].Value,
		"topic":              env["WALKSTAGE_INPUT_TOPIC"].Value,
		"lagThreshold":       "10",
		"allowIdleConsumers": "false",
		"tls":                "enable",
		"sasl":               "scram_sha512",
	} {
		if trig.Metadata[k] != want {
			t.Errorf("kafka trigger %s = %q, want %q", k, trig.Metadata[k], want)
		}
	}
	ta := r.TriggerAuthentication
	if ta == nil || trig.AuthenticationRef == nil || trig.AuthenticationRef.Name != ta.Metadata.Name {
		t.Fatal("the kafka trigger does not reference the chart's TriggerAuthentication")
	}
	params := map[string]string{}
	for _, s := range ta.Spec.SecretTargetRef {
		params[s.Parameter] = s.Name + "/" + s.Key
	}
	for p, want := range map[string]string{"ca": "kafka-client-tls/ca.crt", "cert": "kafka-client-tls/tls.crt",
		"key": "kafka-client-tls/tls.key", "password": "kafka-sasl/password"} {
		if params[p] != want {
			t.Errorf("TriggerAuthentication %s = %q, want %q", p, params[p], want)
		}
	}
	if len(ta.Spec.Env) != 1 || ta.Spec.Env[0].Name != "WALKSTAGE_SASL_USERNAME" || ta.Spec.Env[0].ContainerName != "walkstage" {
		t.Errorf("TriggerAuthentication should read the SASL user from the container: %+v", ta.Spec.Env)
	}

	// ServiceMonitor and PDB select the Deployment's pods.
	podLabels := labels.Set(r.Deployment.Spec.Template.Labels)
	sm := r.ServiceMonitor
	if sm == nil {
		t.Fatal("serviceMonitor.enabled renders no ServiceMonitor")
	}
	if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(r.Service.Labels)) {
		t.Error("the ServiceMonitor does not select the Service")
	}
	if sm.Metadata.Labels["release"] != "prometheus" {
		t.Error("serviceMonitor.labels are not on the ServiceMonitor")
	}
	if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != r.Service.Spec.Ports[0].Name || sm.Spec.Endpoints[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints = %+v, want port %s path /metrics", sm.Spec.Endpoints, r.Service.Spec.Ports[0].Name)
	}
	pdb := r.PodDisruptionBudget
	if pdb == nil {
		t.Fatal("podDisruptionBudget.enabled renders no PodDisruptionBudget")
	}
	if !labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(podLabels) {
		t.Error("the PodDisruptionBudget does not select the pods")
	}
	if (pdb.Spec.MaxUnavailable == nil) == (pdb.Spec.MinAvailable == nil) {
		t.Error("the PodDisruptionBudget must set exactly one of maxUnavailable and minAvailable")
	}
}

// TestChartCPUOnly renders for a cluster without GPUs: nothing about GPUs.
func TestChartCPUOnly(t *testing.T) {
	out, err := runHelm(t, renderArgs("testdata/cpu-only.yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeManifests(t, out)
	checkWorkload(t, r, false)
	if containerEnv(t, r)["WALKSTAGE_ENGINE"].Value != "cpu" {
		t.Error("WALKSTAGE_ENGINE is not cpu")
	}
}

// TestChartKEDASASLUserFromSecret: with the SASL user in the Secret, both the
// stage and the scaler read it from there.
func TestChartKEDASASLUserFromSecret(t *testing.T) {
	out, err := runHelm(t, renderArgs("testdata/keda-sasl-user-secret.yaml")...)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeManifests(t, out)
	checkWorkload(t, r, true)
	e := containerEnv(t, r)["WALKSTAGE_SASL_USERNAME"]
	if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != "username" {
		t.Errorf("WALKSTAGE_SASL_USERNAME should come from the Secret: %+v", e)
	}
	if r.ScaledObject == nil || *r.ScaledObject.Spec.MaxReplicaCount != 6 {
		t.Fatal("maxReplicaCount should default to keda.partitions (6)")
	}
	if got := r.ScaledObject.Spec.Triggers[0].Metadata["sasl"]; got != "plaintext" {
		t.Errorf("sasl = %q, want plaintext", got)
	}
	ta := r.TriggerAuthentication
	if ta == nil || len(ta.Spec.SecretTargetRef) != 2 || len(ta.Spec.Env) != 0 {
		t.Fatalf("TriggerAuthentication should hold username and password from the Secret: %+v", ta)
	}
}

// TestChartRejectsBadValues: values.schema.json and the templates' checks
// refuse what would deploy a broken or unsafe stage.
func TestChartRejectsBadValues(t *testing.T) {
	base := "config: {BROKERS: 'kafka:9092', GRAPH: 's3://g/web.wsg', OUTPUT_URL: 's3://walks'}\n"
	cases := []struct{ name, values, want string }{
		{"unknown config key", "config: {BROKER: 'kafka:9092'}", "BROKER"},
		{"chart-managed variable under config", "config: {SHUTDOWN_TIMEOUT: 10s}", "SHUTDOWN_TIMEOUT"},
		{"bad engine", "config: {ENGINE: tpu}", "ENGINE"},
		{"bad label table timing", "config: {CPU_LABEL_TABLES: sometimes}", "CPU_LABEL_TABLES"},
		{"fused table limit below -1", "config: {CPU_FUSED_TABLE_BYTES: -2}", "CPU_FUSED_TABLE_BYTES"},
		{"bad sasl mechanism", "config: {SASL_MECHANISM: kerberos}", "SASL_MECHANISM"},
		{"duration without unit", "config: {SESSION_TIMEOUT: '30'}", "SESSION_TIMEOUT"},
		{"broker without port", "config: {BROKERS: kafka}", "BROKERS"},
		{"walk length above engine limit", "config: {MAX_WALK_LENGTH: 70000}", "MAX_WALK_LENGTH"},
		{"string for a number", "config: {MAX_SEEDS: many}", "MAX_SEEDS"},
		{"output memory below 1 MiB", "config: {OUTPUT_MEMORY_BYTES: 1000}", "OUTPUT_MEMORY_BYTES"},
		{"request cost budget of 0", "config: {MAX_REQUEST_COST: 0}", "MAX_REQUEST_COST"},
		{"negative micro-batch cost budget", "config: {MICROBATCH_MAX_COST: -1}", "MICROBATCH_MAX_COST"},
		{"writable root filesystem", "securityContext: {readOnlyRootFilesystem: false}", "readOnlyRootFilesystem"},
		{"privilege escalation", "securityContext: {allowPrivilegeEscalation: true}", "allowPrivilegeEscalation"},
		{"root pod", "podSecurityContext: {runAsNonRoot: false}", "runAsNonRoot"},
		{"root uid", "podSecurityContext: {runAsNonRoot: true, runAsUser: 0}", "runAsUser"},
		{"added capability", "securityContext: {capabilities: {drop: [ALL], add: [NET_ADMIN]}}", "add"},
		{"zero GPUs", "gpu: {count: 0}", "count"},
		{"bad image digest", "image: {digest: latest}", "digest"},
		{"metrics port out of range", "metrics: {port: 70000}", "port"},
		{"grace period within shutdown", "terminationGracePeriodSeconds: 30", "must exceed shutdownTimeoutSeconds"},
		{"keda without partitions", "keda: {enabled: true}", "partitions"},
		{"keda above partitions", "keda: {enabled: true, partitions: 4, maxReplicas: 8}", "exceeds keda.partitions"},
		{"keda min above max", "keda: {enabled: true, partitions: 4, minReplicas: 5}", "minReplicas"},
		{"sasl secret without mechanism", "kafka: {sasl: {existingSecret: s}}", "SASL_MECHANISM"},
		{"sasl user twice", "config: {SASL_MECHANISM: plain, SASL_USERNAME: u}\nkafka: {sasl: {existingSecret: s, usernameKey: user}}", "not both"},
		{"client cert without key", "kafka: {tls: {existingSecret: s, certKey: tls.crt}}", "go together"},
		{"graph volume without source", "graph: {volume: {enabled: true}}", "graph.volume"},
		{"pdb with both bounds", "podDisruptionBudget: {enabled: true, minAvailable: 1, maxUnavailable: 1}", "minAvailable"},
		{"unknown top-level value", "replicas: 3", "replicas"},
	}
	helmPath(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			basef, badf := filepath.Join(dir, "base.yaml"), filepath.Join(dir, "bad.yaml")
			if err := os.WriteFile(basef, []byte(base), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(badf, []byte(c.values+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := runHelm(t, renderArgs(basef, badf)...)
			if err == nil {
				t.Fatalf("helm template accepted %q:\n%.2000s", c.values, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not mention %q:\n%v", c.want, err)
			}
		})
	}
}

// containerEnv is the stage container's environment by name; a name set
// twice fails the test (the later one would silently win).
func containerEnv(t *testing.T, r *rendered) map[string]corev1.EnvVar {
	t.Helper()
	c := stageContainer(t, r)
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s is set twice", e.Name)
		}
		env[e.Name] = e
	}
	return env
}

func stageContainer(t *testing.T, r *rendered) corev1.Container {
	t.Helper()
	cs := r.Deployment.Spec.Template.Spec.Containers
	if len(cs) != 1 || cs[0].Name != "walkstage" {
		t.Fatalf("want one container named walkstage, got %d", len(cs))
	}
	return cs[0]
}

// checkWorkload checks what every render must satisfy: probes, security,
// grace period, resources, GPU scheduling iff gpu, writable paths, secrets.
func checkWorkload(t *testing.T, r *rendered, gpu bool) {
	t.Helper()
	d := r.Deployment
	pod := d.Spec.Template.Spec
	c := stageContainer(t, r)
	env := containerEnv(t, r)
	known := map[string]bool{}
	for _, v := range configVariables(t) {
		known[envPrefix+v.Name] = true
	}
	for name := range env {
		if strings.HasPrefix(name, envPrefix) && !known[name] {
			t.Errorf("%s is not a variable of stage/config/config.go", name)
		}
	}
	for _, name := range secretEnv {
		if e, ok := env[name]; ok && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s must come from a secretKeyRef, not a literal", name)
		}
	}

	// Selector, labels, service account.
	if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Error("the Deployment's selector does not match its pod labels")
	}
	if !labels.SelectorFromSet(r.Service.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Error("the Service does not select the pods")
	}
	if r.ServiceAccount != nil && pod.ServiceAccountName != r.ServiceAccount.Name {
		t.Errorf("pod uses service account %q, chart creates %q", pod.ServiceAccountName, r.ServiceAccount.Name)
	}
	if len(c.Command) != 0 || !slices.Equal(c.Args, []string{"run"}) {
		t.Errorf("command %v args %v: want the image's entrypoint with args [run]", c.Command, c.Args)
	}

	// Metrics port, probes.
	var metricsPort int32
	for _, p := range c.Ports {
		if p.Name == "metrics" {
			metricsPort = p.ContainerPort
		}
	}
	if metricsPort == 0 {
		t.Fatal("no container port named metrics")
	}
	if got, want := env["WALKSTAGE_METRICS_ADDR"].Value, ":"+strconv.Itoa(int(metricsPort)); got != want {
		t.Errorf("WALKSTAGE_METRICS_ADDR = %q, want %q (the metrics port)", got, want)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no HTTP %s probe", p.name)
			continue
		}
		if p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "metrics" {
			t.Errorf("%s probe %s on %s, want %s on metrics", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port.String(), p.path)
		}
	}
	var svcPort bool
	for _, p := range r.Service.Spec.Ports {
		svcPort = svcPort || (p.Name == "metrics" && p.TargetPort.String() == "metrics")
	}
	if !svcPort {
		t.Error("the Service has no metrics port targeting the container's")
	}

	// Grace period beyond the stage's own shutdown deadline.
	shutdown, err := time.ParseDuration(env["WALKSTAGE_SHUTDOWN_TIMEOUT"].Value)
	if err != nil {
		t.Fatalf("WALKSTAGE_SHUTDOWN_TIMEOUT: %v", err)
	}
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= shutdown {
		t.Errorf("terminationGracePeriodSeconds %v is not above the shutdown timeout %v", g, shutdown)
	}

	// Security.
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("pod securityContext must run as a non-root uid: %+v", psc)
	}
	if psc != nil && (psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault) {
		t.Error("pod seccompProfile is not RuntimeDefault")
	}
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || (sc.Privileged != nil && *sc.Privileged) ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container securityContext must be non-root, read-only root, no escalation, capabilities dropped: %+v", sc)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("the pod automounts a service account token it never uses")
	}

	// Resources, GPU iff gpu.
	res := c.Resources
	for _, q := range []struct {
		name string
		q    resource.Quantity
	}{{"requests.cpu", res.Requests[corev1.ResourceCPU]}, {"requests.memory", res.Requests[corev1.ResourceMemory]},
		{"limits.memory", res.Limits[corev1.ResourceMemory]}} {
		if q.q.IsZero() {
			t.Errorf("resources.%s is not set", q.name)
		}
	}
	gpus, hasGPU := res.Limits[gpuResource]
	_, requestsGPU := res.Requests[gpuResource]
	hasGPUSelector := pod.NodeSelector["nvidia.com/gpu.present"] == "true"
	hasGPUToleration := slices.ContainsFunc(pod.Tolerations, func(tl corev1.Toleration) bool { return tl.Key == string(gpuResource) })
	image := c.Image
	if gpu {
		if !hasGPU || gpus.Value() != 1 {
			t.Errorf("limits[%s] = %v, want 1", gpuResource, gpus.String())
		}
		if !hasGPUSelector || !hasGPUToleration {
			t.Errorf("GPU pods need the GPU node selector and toleration: %v %v", pod.NodeSelector, pod.Tolerations)
		}
		if strings.HasSuffix(image, "-cpu") {
			t.Errorf("GPU pods run the CPU image %s", image)
		}
	} else {
		if hasGPU || requestsGPU || hasGPUSelector || hasGPUToleration || pod.RuntimeClassName != nil {
			t.Errorf("a CPU-only render mentions GPUs: resources %v, nodeSelector %v, tolerations %v", res, pod.NodeSelector, pod.Tolerations)
		}
		if !strings.HasSuffix(image, "-cpu") {
			t.Errorf("CPU-only pods run %s, want the -cpu image", image)
		}
	}

	// Read-only root: every writable mount is an emptyDir, and the graph
	// download directory is one of them.
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	writable := map[string]bool{}
	for _, m := range c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Errorf("mount %s has no volume", m.Name)
			continue
		}
		if !m.ReadOnly {
			if v.EmptyDir == nil {
				t.Errorf("mount %s at %s is writable but not an emptyDir", m.Name, m.MountPath)
			}
			writable[m.MountPath] = true
		}
	}
	if dir := env["WALKSTAGE_GRAPH_DOWNLOAD_DIR"].Value; !writable[dir] {
		t.Errorf("WALKSTAGE_GRAPH_DOWNLOAD_DIR %q is not a writable emptyDir mount", dir)
	}
	if !writable["/tmp"] {
		t.Error("/tmp is not a writable emptyDir")
	}
}

// checkSecretFile checks that path lies in a read-only mount of a Secret volume.
func checkSecretFile(t *testing.T, pod corev1.PodSpec, path, what string) {
	t.Helper()
	if path == "" {
		t.Errorf("%s is not set", what)
		return
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		volumes[v.Name] = v
	}
	for _, m := range pod.Containers[0].VolumeMounts {
		if filepath.Dir(path) == m.MountPath {
			if !m.ReadOnly || volumes[m.Name].Secret == nil {
				t.Errorf("%s %s is in mount %s, which is not a read-only Secret", what, path, m.Name)
			}
			return
		}
	}
	t.Errorf("%s %s is in no mounted volume", what, path)
}
