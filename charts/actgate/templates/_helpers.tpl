{{/* Common labels. */}}
{{- define "actgate.labels" -}}
app.kubernetes.io/name: actgate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The one image. */}}
{{- define "actgate.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Exempt namespaces, always including the release namespace. */}}
{{- define "actgate.exemptNamespaces" -}}
{{- $ns := .Values.webhook.exemptNamespaces | default list -}}
{{- if not (has .Release.Namespace $ns) -}}{{- $ns = append $ns .Release.Namespace -}}{{- end -}}
{{- toJson $ns -}}
{{- end -}}

{{/* The webhook Service's DNS name. */}}
{{- define "actgate.webhookHost" -}}
actgate-webhook-service.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* The authority Service's DNS name. */}}
{{- define "actgate.authorityHost" -}}
actgate-authority.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* Pod security context of actgate's own pods (restricted Pod Security Standard). */}}
{{- define "actgate.podSecurityContext" -}}
runAsNonRoot: true
# A fixed non-root identity, and the group that owns mounted Secret files (fsGroup), so the
# signing key (mode 0440) is readable by the process and by no other user of the node.
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "actgate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{/* The Secret holding the authority-signing key. */}}
{{- define "actgate.signingSecret" -}}
{{ .Values.authority.signingKey.existingSecret | default "actgate-authority-signing-key" }}
{{- end -}}

{{/* The injection's metricsPort: sidecar.metrics.port, or 0 when sidecar.metrics.enabled is
false. Checked here too, so a bad value fails the install rather than the manager's start. */}}
{{- define "actgate.sidecarMetricsPort" -}}
{{- if .Values.sidecar.metrics.enabled -}}
{{- $port := int .Values.sidecar.metrics.port -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail (printf "sidecar.metrics.port %d is not a TCP port (set sidecar.metrics.enabled=false to disable metrics)" $port) -}}
{{- end -}}
{{- if eq $port (int .Values.sidecar.port) -}}
{{- fail (printf "sidecar.metrics.port %d must differ from sidecar.port: the metrics listener binds every address, 127.0.0.1 included" $port) -}}
{{- end -}}
{{- $port -}}
{{- else -}}
0
{{- end -}}
{{- end -}}

{{/* The link announcements carry: notifications.consoleURL, else the approval service's
external URL (its page opens the moment from "#moment-NAMESPACE/NAME") when it is enabled. */}}
{{- define "actgate.consoleURL" -}}
{{- if .Values.notifications.consoleURL -}}
{{- .Values.notifications.consoleURL -}}
{{- else if .Values.approval.enabled -}}
{{- printf "%s/" (trimSuffix "/" .Values.approval.externalURL) -}}
{{- end -}}
{{- end -}}
