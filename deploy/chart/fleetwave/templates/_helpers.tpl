{{/* The release's base name: the release name when it already says fleetwave, else <release>-fleetwave. */}}
{{- define "fleetwave.fullname" -}}
{{- if contains "fleetwave" .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-fleetwave" .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The controller's ServiceAccount, roles and bindings (`fleetwave install` uses fleetwave-controller). */}}
{{- define "fleetwave.controller" -}}
{{- printf "%s-controller" (include "fleetwave.fullname" .) -}}
{{- end -}}

{{- define "fleetwave.selectorLabels" -}}
app.kubernetes.io/name: fleetwave
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "fleetwave.labels" -}}
{{ include "fleetwave.selectorLabels" . }}
app.kubernetes.io/part-of: fleetwave
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "fleetwave.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* One generated CRD file with the release's labels added (so `-l app.kubernetes.io/instance=...` finds it). */}}
{{- define "fleetwave.crd" -}}
{{- $crd := .root.Files.Get .path | fromYaml -}}
{{- $labels := dict "app.kubernetes.io/name" "fleetwave" "app.kubernetes.io/instance" .root.Release.Name "app.kubernetes.io/version" .root.Chart.AppVersion "app.kubernetes.io/managed-by" .root.Release.Service "helm.sh/chart" (printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_") -}}
{{- $_ := set $crd.metadata "labels" (merge (default (dict) $crd.metadata.labels) $labels) -}}
{{ toYaml $crd }}
{{- end -}}
