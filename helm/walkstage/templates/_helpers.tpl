{{/* Names and labels shared by every manifest. */}}

{{- define "walkstage.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "walkstage.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "walkstage.selectorLabels" -}}
app.kubernetes.io/name: {{ include "walkstage.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "walkstage.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "walkstage.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: walk-stage
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "walkstage.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "walkstage.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: digest wins; the tag defaults to appVersion, "-cpu" for the CPU image. */}}
{{- define "walkstage.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- $tag := .Values.image.tag | default (ternary .Chart.AppVersion (printf "%s-cpu" .Chart.AppVersion) .Values.gpu.enabled) -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
One config value as an environment string. Helm reads numbers in values files
as float64, which would print 268435456 as 2.68435456e+08; the schema allows
only integers there, so they are printed as integers. Lists are joined by
commas (WALKSTAGE_BROKERS).
*/}}
{{- define "walkstage.envValue" -}}
{{- if kindIs "slice" . -}}
{{- join "," . -}}
{{- else if kindIs "float64" . -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/* The brokers as one comma-separated string (KEDA's bootstrapServers). */}}
{{- define "walkstage.brokers" -}}
{{- include "walkstage.envValue" .Values.config.BROKERS -}}
{{- end -}}

{{/* Whether the chart makes a TriggerAuthentication for the KEDA scaler. */}}
{{- define "walkstage.kedaAuth" -}}
{{- if and (not .Values.keda.authenticationRef) (or .Values.kafka.tls.existingSecret .Values.kafka.sasl.existingSecret) -}}
true
{{- end -}}
{{- end -}}

{{/*
Checks across values that values.schema.json cannot express. Each message
names the values to change.
*/}}
{{- define "walkstage.validate" -}}
{{- $shutdown := int64 .Values.shutdownTimeoutSeconds -}}
{{- if not (kindIs "invalid" .Values.terminationGracePeriodSeconds) -}}
{{- if le (int64 .Values.terminationGracePeriodSeconds) $shutdown -}}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed shutdownTimeoutSeconds (%d): the kubelet would kill the stage inside its own shutdown deadline" (int64 .Values.terminationGracePeriodSeconds) $shutdown) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.kafka.sasl.usernameKey .Values.config.SASL_USERNAME -}}
{{- fail "set either config.SASL_USERNAME or kafka.sasl.usernameKey, not both" -}}
{{- end -}}
{{- if and .Values.kafka.sasl.existingSecret (has (lower (toString .Values.config.SASL_MECHANISM)) (list "" "none")) -}}
{{- fail "kafka.sasl.existingSecret is set but config.SASL_MECHANISM is none: set plain, scram-sha-256 or scram-sha-512" -}}
{{- end -}}
{{- if and (not .Values.kafka.tls.existingSecret) (or .Values.kafka.tls.certKey .Values.kafka.tls.keyKey) -}}
{{- fail "kafka.tls.certKey/keyKey need kafka.tls.existingSecret" -}}
{{- end -}}
{{- if ne (not .Values.kafka.tls.certKey) (not .Values.kafka.tls.keyKey) -}}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (mutual TLS needs both)" -}}
{{- end -}}
{{- if and .Values.graph.volume.enabled (not .Values.graph.volume.existingClaim) (empty .Values.graph.volume.source) -}}
{{- fail "graph.volume.enabled needs graph.volume.existingClaim or graph.volume.source" -}}
{{- end -}}
{{- if .Values.keda.enabled -}}
{{- $partitions := int64 .Values.keda.partitions -}}
{{- if lt $partitions 1 -}}
{{- fail "keda.enabled needs keda.partitions: the partition count of config.INPUT_TOPIC" -}}
{{- end -}}
{{- $max := int64 (.Values.keda.maxReplicas | default $partitions) -}}
{{- if gt $max $partitions -}}
{{- fail (printf "keda.maxReplicas (%d) exceeds keda.partitions (%d): replicas beyond the partition count get no partition and sit idle" $max $partitions) -}}
{{- end -}}
{{- if gt (int64 .Values.keda.minReplicas) $max -}}
{{- fail (printf "keda.minReplicas (%d) exceeds the maximum replica count (%d)" (int64 .Values.keda.minReplicas) $max) -}}
{{- end -}}
{{- if not .Values.config.BROKERS -}}
{{- fail "keda.enabled needs config.BROKERS (the scaler reads the group's lag from the brokers)" -}}
{{- end -}}
{{- end -}}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "invalid" .Values.podDisruptionBudget.minAvailable)) (not (kindIs "invalid" .Values.podDisruptionBudget.maxUnavailable)) -}}
{{- fail "podDisruptionBudget: set minAvailable or maxUnavailable (null the other)" -}}
{{- end -}}
{{- end -}}
