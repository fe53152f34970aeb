{{/* The release's base name: fullnameOverride if set; else the release name when it already says
fleetwave-agent (or nameOverride), else <release>-fleetwave-agent (or <release>-<nameOverride>).
Release "fleetwave-agent" gives the names `fleetwave cluster register --pull` prints. */}}
{{- define "fleetwave-agent.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "fleetwave-agent" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "fleetwave-agent.selectorLabels" -}}
app.kubernetes.io/name: fleetwave-agent
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "fleetwave-agent.labels" -}}
{{ include "fleetwave-agent.selectorLabels" . }}
app.kubernetes.io/part-of: fleetwave
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The controller's image, chosen as the controller chart chooses it. */}}
{{- define "fleetwave-agent.image" -}}
{{- $repository := required "image.repository is not set: the agent runs the controller's image (tools/image/build.sh); push it to your registry and set image.repository" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding the hub kubeconfig: the chart's own, or hub.existingSecret (exactly one). */}}
{{- define "fleetwave-agent.hubSecret" -}}
{{- if and .Values.hub.existingSecret .Values.hub.kubeconfig -}}
{{- fail "set hub.kubeconfig or hub.existingSecret, not both" -}}
{{- else if .Values.hub.existingSecret -}}
{{- .Values.hub.existingSecret -}}
{{- else if .Values.hub.kubeconfig -}}
{{- printf "%s-hub" (include "fleetwave-agent.fullname" .) -}}
{{- else -}}
{{- fail "hub.kubeconfig is not set: `fleetwave cluster register NAME --pull --agent-values FILE` writes it (or name a Secret holding it in hub.existingSecret)" -}}
{{- end -}}
{{- end -}}

{{/* The key of the hub kubeconfig in that Secret. */}}
{{- define "fleetwave-agent.hubKey" -}}
{{- if .Values.hub.existingSecret -}}{{ .Values.hub.existingSecretKey }}{{- else -}}kubeconfig{{- end -}}
{{- end -}}
