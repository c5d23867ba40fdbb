{{/*
Names. Every object of a release starts with the full name; Service names must stay within 63
characters after their suffixes, hence the short limit.
*/}}
{{- define "kueue-timeshare.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{- define "kueue-timeshare.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "kueue-timeshare.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kueue-timeshare.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kueue-timeshare.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kueue-timeshare.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kueue-timeshare.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (printf "%s-controller-manager" (include "kueue-timeshare.fullname" .)) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
Upstream's certificate rotator derives the names of the webhook configurations it injects its CA
into from the webhook Service name: "<base>-webhook-service" gives
"<base>-validating-webhook-configuration" and "<base>-mutating-webhook-configuration".
*/}}
{{- define "kueue-timeshare.webhookServiceName" -}}
{{- printf "%s-webhook-service" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.validatingWebhookName" -}}
{{- printf "%s-validating-webhook-configuration" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.mutatingWebhookName" -}}
{{- printf "%s-mutating-webhook-configuration" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.webhookSecretName" -}}
{{- printf "%s-webhook-server-cert" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.metricsServiceName" -}}
{{- printf "%s-metrics-service" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.metricsSecretName" -}}
{{- printf "%s-metrics-server-cert" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.visibilityServiceName" -}}
{{- printf "%s-visibility-server" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.visibilitySecretName" -}}
{{- printf "%s-visibility-server-cert" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.issuerName" -}}
{{- printf "%s-selfsigned" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}
{{- define "kueue-timeshare.webhookCertificateName" -}}
{{- printf "%s-webhook-cert" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}

{{/* cert-manager's cainjector annotation for objects that trust the webhook certificate. */}}
{{- define "kueue-timeshare.injectWebhookCA" -}}
{{- if .Values.certManager.enabled -}}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "kueue-timeshare.webhookCertificateName" .) }}
{{- end -}}
{{- end -}}

{{/*
CRDs whose objects exist in several versions with a conversion between them (the types of
sigs.k8s.io/kueue that implement conversion.Convertible). Upstream's rotator injects its CA into
exactly these CRDs.
*/}}
{{- define "kueue-timeshare.convertibleCRDs" -}}
- clusterqueues.kueue.x-k8s.io
- cohorts.kueue.x-k8s.io
- localqueues.kueue.x-k8s.io
- multikueueclusters.kueue.x-k8s.io
- workloads.kueue.x-k8s.io
{{- end -}}

{{/*
The --feature-gates value: the featureGates map, sorted. Without the visibility API service the
manager does not need to run the visibility server, so VisibilityOnDemand follows
visibility.enabled unless set explicitly.
*/}}
{{- define "kueue-timeshare.featureGates" -}}
{{- $gates := deepCopy (default (dict) .Values.featureGates) -}}
{{- if and (not .Values.visibility.enabled) (not (hasKey $gates "VisibilityOnDemand")) -}}
{{- $_ := set $gates "VisibilityOnDemand" false -}}
{{- end -}}
{{- $pairs := list -}}
{{- range $name := keys $gates | sortAlpha -}}
{{- $pairs = append $pairs (printf "%s=%t" $name (get $gates $name)) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Generated inputs copied by hack/chart-generate.sh; a chart without them cannot render. */}}
{{- define "kueue-timeshare.generated" -}}
{{- $content := .context.Files.Get .path -}}
{{- if not $content -}}
{{- fail (printf "%s is missing from the chart: run `make helm-generate` (or `make helm-package`) to copy the generated manifests in" .path) -}}
{{- end -}}
{{- $content -}}
{{- end -}}

{{/*
The manager configuration file: kueueConfiguration, with the fields that must agree with the
objects this chart creates set by the chart, plus the timeshare section.
*/}}
{{- define "kueue-timeshare.config" -}}
{{- $user := deepCopy (default (dict) .Values.kueueConfiguration) -}}
{{- range $key := list "featureGates" "timeshare" "apiVersion" "kind" "namespace" "internalCertManagement" -}}
{{- if hasKey $user $key -}}
{{- fail (printf "kueueConfiguration.%s is set by the chart: use the top-level values (featureGates, timeshare, certManager) instead" $key) -}}
{{- end -}}
{{- end -}}
{{- $certs := dict "enable" (not .Values.certManager.enabled) -}}
{{- if not .Values.certManager.enabled -}}
{{- $_ := set $certs "webhookServiceName" (include "kueue-timeshare.webhookServiceName" .) -}}
{{- $_ := set $certs "webhookSecretName" (include "kueue-timeshare.webhookSecretName" .) -}}
{{- end -}}
{{- $owned := dict
  "apiVersion" "config.kueue.x-k8s.io/v1beta2"
  "kind" "Configuration"
  "namespace" .Release.Namespace
  "health" (dict "healthProbeBindAddress" (printf ":%d" (int .Values.health.port)))
  "metrics" (dict "bindAddress" (printf ":%d" (int .Values.metrics.port)))
  "webhook" (dict "port" (int .Values.webhook.port))
  "leaderElection" (dict "resourceNamespace" .Release.Namespace)
  "internalCertManagement" $certs
  "visibilityServer" (dict "bindPort" (int .Values.visibility.port))
  "integrations" (dict "frameworks" .Values.integrations.frameworks)
-}}
{{- if .Values.integrations.externalFrameworks -}}
{{- $_ := set $owned.integrations "externalFrameworks" .Values.integrations.externalFrameworks -}}
{{- end -}}
{{- $cfg := mustMergeOverwrite $user $owned -}}
{{- $_ := set $cfg "timeshare" (deepCopy .Values.timeshare) -}}
{{- toYaml $cfg -}}
{{- end -}}
