{{/*
Names. The webhook configurations, the boundary ConfigMap and the leader
election Lease have fixed names: the binary and webhooks.Configurations() use
them (a Go test compares the rendered webhook configurations with it).
*/}}

{{- define "instance-manager.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified app name, at most 50 characters so that the suffixed names
below ("-webhook-cert") stay valid DNS labels.
*/}}
{{- define "instance-manager.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "instance-manager.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "instance-manager.labels" -}}
helm.sh/chart: {{ include "instance-manager.chart" . }}
{{ include "instance-manager.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "instance-manager.selectorLabels" -}}
app.kubernetes.io/name: {{ include "instance-manager.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "instance-manager.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "instance-manager.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Namespace of the boundary ConfigMap: configNamespace, else the release namespace. */}}
{{- define "instance-manager.configNamespace" -}}
{{- default .Release.Namespace .Values.configNamespace }}
{{- end }}

{{/* app.ConfigMapName */}}
{{- define "instance-manager.boundaryConfigMapName" -}}
instance-manager
{{- end }}

{{/* webhooks.MutatingConfigurationName and webhooks.ValidatingConfigurationName */}}
{{- define "instance-manager.mutatingWebhookConfigurationName" -}}
instance-manager
{{- end }}
{{- define "instance-manager.validatingWebhookConfigurationName" -}}
instance-manager
{{- end }}

{{/* The Lease the replicas elect their leader with (--leader-election-id). */}}
{{- define "instance-manager.leaderElectionID" -}}
instance-manager.instancemgr.keikoproj.io
{{- end }}

{{- define "instance-manager.webhookServiceName" -}}
{{- printf "%s-webhook" (include "instance-manager.fullname" .) }}
{{- end }}

{{- define "instance-manager.metricsServiceName" -}}
{{- printf "%s-metrics" (include "instance-manager.fullname" .) }}
{{- end }}

{{/* The Secret holding the webhook serving certificate (cert-manager's or the rotator's). */}}
{{- define "instance-manager.certSecretName" -}}
{{- printf "%s-webhook-cert" (include "instance-manager.fullname" .) }}
{{- end }}

{{- define "instance-manager.certificateName" -}}
{{- printf "%s-webhook" (include "instance-manager.fullname" .) }}
{{- end }}

{{- define "instance-manager.issuerName" -}}
{{- printf "%s-selfsigned" (include "instance-manager.fullname" .) }}
{{- end }}

{{/* The Certificate whose CA cert-manager injects into the webhook configurations. */}}
{{- define "instance-manager.injectCAFrom" -}}
{{- printf "%s/%s" .Release.Namespace (include "instance-manager.certificateName" .) }}
{{- end }}

{{/* clientConfig of one webhook; the argument is (list $ path). */}}
{{- define "instance-manager.webhookClientConfig" -}}
{{- $ := index . 0 -}}
clientConfig:
  service:
    namespace: {{ $.Release.Namespace }}
    name: {{ include "instance-manager.webhookServiceName" $ }}
    path: {{ index . 1 }}
    port: 443
{{- end }}
