{{/* Names and labels shared by the chart's templates. */}}
{{- define "mssql-cdc.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mssql-cdc.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mssql-cdc.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{- end -}}

{{- define "mssql-cdc.serviceAccountName" -}}
{{- default (include "mssql-cdc.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "mssql-cdc.workerServiceAccountName" -}}
{{- default (printf "%s-worker" (include "mssql-cdc.fullname" .)) .Values.worker.serviceAccount.name -}}
{{- end -}}

{{- define "mssql-cdc.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "mssql-cdc.workerNamespaces" -}}
{{- if .Values.worker.namespaces -}}
{{- join "," .Values.worker.namespaces -}}
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* The names of a list of {name: ...} objects, comma separated. */}}
{{- define "mssql-cdc.names" -}}
{{- $names := list -}}
{{- range . }}{{ $names = append $names .name }}{{ end -}}
{{- join "," $names -}}
{{- end -}}

{{/* A map as KEY=VALUE pairs, comma separated, in key order. */}}
{{- define "mssql-cdc.keyValues" -}}
{{- $pairs := list -}}
{{- range $key, $value := . }}{{ $pairs = append $pairs (printf "%s=%s" $key $value) }}{{ end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Whether the operator watches only worker.namespaces (namespaced RBAC). */}}
{{- define "mssql-cdc.namespaced" -}}
{{- if .Values.worker.namespaces }}true{{ end -}}
{{- end -}}
