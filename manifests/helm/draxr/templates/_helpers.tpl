{{/*
draxr's objects carry the same names and labels as `draxr manifests` renders (tests/install/test_chart.py
compares them), so the chart and the plain manifests install the same thing.
*/}}

{{/* The labels of one component: draxr.labels "webhook" */}}
{{- define "draxr.labels" -}}
app.kubernetes.io/name: draxr
app.kubernetes.io/component: {{ . }}
{{- end -}}

{{- define "draxr.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* A Deployment's pod-level placement: priorityClassName, nodeSelector, tolerations. */}}
{{- define "draxr.placement" -}}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* The container's hardening, identical for both Deployments. */}}
{{- define "draxr.securityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
capabilities:
  drop:
  - ALL
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The namespaces whose objects the namespaced hooks never see. */}}
{{- define "draxr.namespaceSelector" -}}
matchExpressions:
- key: kubernetes.io/metadata.name
  operator: NotIn
  values:
  {{- toYaml (uniq (concat (list "kube-system" .Release.Namespace) .Values.optOut.namespaces)) | nindent 2 }}
{{- with .Values.optOut.label }}
- key: {{ . | quote }}
  operator: NotIn
  values:
  - "true"
{{- end }}
{{- end -}}

{{/* clientConfig of one hook: draxr.clientConfig (list $ "/mutate/pods" $caBundle) */}}
{{- define "draxr.clientConfig" -}}
{{- $root := index . 0 -}}
{{- $path := index . 1 -}}
{{- $caBundle := index . 2 -}}
{{- if $root.Values.webhookURL }}
url: {{ printf "%s%s" (trimSuffix "/" $root.Values.webhookURL) $path | quote }}
{{- else }}
service:
  namespace: {{ $root.Release.Namespace }}
  name: draxr-webhook
  path: {{ $path }}
  port: 443
{{- end }}
{{- with $caBundle }}
caBundle: {{ . }}
{{- end }}
{{- end -}}
