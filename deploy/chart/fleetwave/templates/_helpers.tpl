{{/* The release's base name: fullnameOverride if set; else the release name when it already says
fleetwave (or nameOverride), else <release>-fleetwave (or <release>-<nameOverride>). */}}
{{- define "fleetwave.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default "fleetwave" .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
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
{{- $repository := required "image.repository is not set: build the image (tools/image/build.sh), push it to your registry and set image.repository" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* One generated CRD file with the release's labels added (so `-l app.kubernetes.io/instance=...` finds it). */}}
{{- define "fleetwave.crd" -}}
{{- $crd := .root.Files.Get .path | fromYaml -}}
{{- $labels := dict "app.kubernetes.io/name" "fleetwave" "app.kubernetes.io/instance" .root.Release.Name "app.kubernetes.io/version" .root.Chart.AppVersion "app.kubernetes.io/managed-by" .root.Release.Service "helm.sh/chart" (printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_") -}}
{{- $_ := set $crd.metadata "labels" (merge (default (dict) $crd.metadata.labels) $labels) -}}
{{- if and (not .root.Values.crds.keep) $crd.metadata.annotations -}}
{{- $_ := unset $crd.metadata.annotations "helm.sh/resource-policy" -}}
{{- end -}}
{{ toYaml $crd }}
{{- end -}}

{{/* Where namespaced rights are bound with watchNamespaces (ADR 0074): those and the release's own. */}}
{{- define "fleetwave.watched" -}}
{{- $all := append (default (list) .Values.watchNamespaces) .Release.Namespace | uniq | sortAlpha -}}
{{- join "," $all -}}
{{- end -}}

{{/* A ClusterRole of generated rules (.rules: a file under files/rbac) with the release's labels. */}}
{{- define "fleetwave.clusterRole" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {{ .name }}
  labels:
    {{- include "fleetwave.labels" .root | nindent 4 }}
rules:
{{ .root.Files.Get .rules }}
{{- end -}}

{{/* The controller's ServiceAccount bound to ClusterRole .role: cluster-wide, or in namespace .where. */}}
{{- define "fleetwave.binding" -}}
apiVersion: rbac.authorization.k8s.io/v1
kind: {{ if .where }}RoleBinding{{ else }}ClusterRoleBinding{{ end }}
metadata:
  name: {{ .name }}
  {{- if .where }}
  namespace: {{ .where }}
  {{- end }}
  labels:
    {{- include "fleetwave.labels" .root | nindent 4 }}
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: {{ .kind | default "ClusterRole" }}
  name: {{ .role }}
subjects:
  - kind: ServiceAccount
    name: {{ include "fleetwave.controller" .root }}
    namespace: {{ .root.Release.Namespace }}
{{- end -}}

{{/* ClusterRole .name over generated rules .prefix: all of them cluster-wide, or with watchNamespaces
     the cluster-scoped part cluster-wide and the namespaced part (.name-watched) in each watched namespace. */}}
{{- define "fleetwave.scopedRoles" -}}
{{- $root := .root -}}
{{- if $root.Values.watchNamespaces }}
{{ include "fleetwave.clusterRole" (dict "root" $root "name" .name "rules" (printf "files/rbac/%scluster-scoped-rules.yaml" .prefix)) }}
---
{{ include "fleetwave.binding" (dict "root" $root "name" .name "role" .name) }}
---
{{ include "fleetwave.clusterRole" (dict "root" $root "name" (printf "%s-watched" .name) "rules" (printf "files/rbac/%swatched-rules.yaml" .prefix)) }}
{{- $name := .name }}
{{- range splitList "," (include "fleetwave.watched" $root) }}
---
{{ include "fleetwave.binding" (dict "root" $root "name" (printf "%s-watched" $name) "role" (printf "%s-watched" $name) "where" .) }}
{{- end }}
{{- else }}
{{ include "fleetwave.clusterRole" (dict "root" $root "name" .name "rules" (printf "files/rbac/%srules.yaml" .prefix)) }}
---
{{ include "fleetwave.binding" (dict "root" $root "name" .name "role" .name) }}
{{- end }}
{{- end -}}
