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

{{- define "kueue-timeshare.workloadAdmissionPolicyName" -}}
{{- printf "%s-workload-manager-annotations" (include "kueue-timeshare.fullname" .) -}}
{{- end -}}

{{/*
The Workload annotations only the manager writes: annotations.ManagerOwned() in
apis/annotations (a test checks they agree).
*/}}
{{- define "kueue-timeshare.managerOwnedAnnotations" -}}
- kueue-timeshare.io/preemption-notice
- kueue-timeshare.io/preemption-deadline
- kueue-timeshare.io/requeue-not-before
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

{{/*
Upstream Kueue's chart values (v0.19.2), mapped onto this chart's in place, so that a values file
written for upstream's chart installs the same manager configuration. A key of upstream's, when
present, wins over this chart's value of the same meaning. Keys that would need something this
chart does not install fail here, naming the key; keys about upstream's image or add-ons that
are not running are ignored (docs/install.md lists each). Every template includes this first;
it only copies, so running it again changes nothing.
*/}}
{{- define "kueue-timeshare.upstreamValues" -}}
{{- $v := .Values -}}
{{- range $key := list "enableVisibilityAPF" "enableMutatingAdmissionPolicy" "enableKueueViz" -}}
{{- if index $v $key -}}
{{- fail (printf "%s: true is not supported: kueue-timeshare's chart does not install %s; leave it false (or unset)" $key (get (dict "enableVisibilityAPF" "the visibility API's FlowSchema and PriorityLevelConfiguration (create them yourself)" "enableMutatingAdmissionPolicy" "upstream's MutatingAdmissionPolicy for nominatedClusterNames" "enableKueueViz" "KueueViz (install it from upstream's chart as a separate release)") $key)) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $v "enablePrometheus" -}}
{{- $_ := set $v.metrics.serviceMonitor "enabled" $v.enablePrometheus -}}
{{- end -}}
{{- if hasKey $v "enableCertManager" -}}
{{- $_ := set $v.certManager "enabled" $v.enableCertManager -}}
{{- end -}}
{{- if hasKey $v "enableVisibilityAuthReaderRoleBinding" -}}
{{- $_ := set $v.visibility "authReaderRoleBinding" $v.enableVisibilityAuthReaderRoleBinding -}}
{{- end -}}
{{- with $v.controllerManager -}}
{{- $cm := . -}}
{{- range $key := list "replicas" "imagePullSecrets" "strategy" "hostNetwork" "dnsPolicy" "nodeSelector" "tolerations" "topologySpreadConstraints" -}}
{{- if hasKey $cm $key -}}
{{- $_ := set $v $key (index $cm $key) -}}
{{- end -}}
{{- end -}}
{{- range $probe := list "readinessProbe" "livenessProbe" -}}
{{- if hasKey $cm $probe -}}
{{- $_ := set $v $probe (mustMergeOverwrite (deepCopy (index $v $probe)) (index $cm $probe)) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $cm "podDisruptionBudget" -}}
{{- $_ := set $v "podDisruptionBudget" (mustMergeOverwrite (deepCopy $v.podDisruptionBudget) $cm.podDisruptionBudget) -}}
{{- end -}}
{{- if hasKey $cm "featureGates" -}}
{{- $gates := default (dict) $v.featureGates -}}
{{- range $i, $g := $cm.featureGates -}}
{{- if or (not (kindIs "map" $g)) (not (hasKey $g "name")) (not (hasKey $g "enabled")) (not (kindIs "bool" $g.enabled)) -}}
{{- fail (printf "controllerManager.featureGates[%d]: each entry is {name: <gate>, enabled: true|false}" $i) -}}
{{- end -}}
{{- $_ := set $gates $g.name $g.enabled -}}
{{- end -}}
{{- $_ := set $v "featureGates" $gates -}}
{{- end -}}
{{- with $cm.manager -}}
{{- $m := . -}}
{{- range $pair := list (list "priorityClassName" "priorityClassName") (list "podAnnotations" "podAnnotations") (list "logLevel" "logLevel") (list "resources" "resources") (list "podSecurityContext" "podSecurityContext") (list "containerSecurityContext" "securityContext") -}}
{{- if and (hasKey $m (index $pair 0)) (not (kindIs "invalid" (index $m (index $pair 0)))) -}}
{{- $_ := set $v (index $pair 1) (index $m (index $pair 0)) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $v.metricsService -}}
{{- $ms := . -}}
{{- range $key := list "type" "labels" "annotations" -}}
{{- if hasKey $ms $key -}}
{{- $_ := set $v.metrics.service $key (index $ms $key) -}}
{{- end -}}
{{- end -}}
{{- if hasKey $ms "ports" -}}
{{- if ne (len $ms.ports) 1 -}}
{{- fail "metricsService.ports: exactly one port is supported (the manager serves /metrics on one port)" -}}
{{- end -}}
{{- $_ := set $v.metrics.service "port" (index $ms.ports 0).port -}}
{{- end -}}
{{- end -}}
{{- with $v.webhookService -}}
{{- $ws := . -}}
{{- if hasKey $ws "type" -}}
{{- $_ := set $v.webhook.service "type" $ws.type -}}
{{- end -}}
{{- if and $ws.ipDualStack $ws.ipDualStack.enabled -}}
{{- $_ := set $v.webhook.service "ipFamilyPolicy" $ws.ipDualStack.ipFamilyPolicy -}}
{{- $_ := set $v.webhook.service "ipFamilies" $ws.ipDualStack.ipFamilies -}}
{{- end -}}
{{- range $i, $p := default (list) $ws.ports -}}
{{- if ne (int $p.port) 443 -}}
{{- fail (printf "webhookService.ports[%d].port: %v is not supported: the webhook configurations and CRD conversion call the Service on 443" $i $p.port) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $v.mutatingWebhook -}}
{{- if hasKey . "reinvocationPolicy" -}}
{{- $_ := set $v.webhook "reinvocationPolicy" .reinvocationPolicy -}}
{{- end -}}
{{- end -}}
{{- with $v.managerConfig -}}
{{- with .controllerManagerConfigYaml -}}
{{- $file := fromYaml . -}}
{{- if hasKey $file "Error" -}}
{{- fail (printf "managerConfig.controllerManagerConfigYaml is not YAML: %s" $file.Error) -}}
{{- end -}}
{{- if ne (default "" $file.apiVersion) "config.kueue.x-k8s.io/v1beta2" -}}
{{- fail (printf "managerConfig.controllerManagerConfigYaml: apiVersion %q is not supported: write the file as config.kueue.x-k8s.io/v1beta2" (default "" $file.apiVersion)) -}}
{{- end -}}
{{- if ne (default "" $file.kind) "Configuration" -}}
{{- fail (printf "managerConfig.controllerManagerConfigYaml: kind %q is not supported: it must be Configuration" (default "" $file.kind)) -}}
{{- end -}}
{{- if hasKey $file "internalCertManagement" -}}
{{- fail "managerConfig.controllerManagerConfigYaml: internalCertManagement is set by the chart: remove it and use enableCertManager (or certManager.enabled)" -}}
{{- end -}}
{{- if hasKey $file "timeshare" -}}
{{- fail "managerConfig.controllerManagerConfigYaml: timeshare is not a field of Kueue's Configuration: use the timeshare values" -}}
{{- end -}}
{{- if and $file.namespace (ne $file.namespace $.Release.Namespace) -}}
{{- fail (printf "managerConfig.controllerManagerConfigYaml: namespace %q differs from the release namespace %q: install the release in %s" $file.namespace $.Release.Namespace $file.namespace) -}}
{{- end -}}
{{- $addr := dict "health" "healthProbeBindAddress" "metrics" "bindAddress" -}}
{{- range $section, $field := $addr -}}
{{- with index $file $section -}}
{{- with index . $field -}}
{{- if not (regexMatch "^:[0-9]+$" .) -}}
{{- fail (printf "managerConfig.controllerManagerConfigYaml: %s.%s %q is not supported: only a port, as \":8081\"" $section $field .) -}}
{{- end -}}
{{- $_ := set (index $v $section) "port" (trimPrefix ":" . | int) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- with $file.webhook -}}
{{- if .port -}}
{{- $_ := set $v.webhook "port" (int .port) -}}
{{- end -}}
{{- end -}}
{{- with $file.visibilityServer -}}
{{- if .bindPort -}}
{{- $_ := set $v.visibility "port" (int .bindPort) -}}
{{- end -}}
{{- end -}}
{{- with $file.integrations -}}
{{- $_ := set $v.integrations "frameworks" (default (list) .frameworks) -}}
{{- $_ := set $v.integrations "externalFrameworks" (default (list) .externalFrameworks) -}}
{{- end -}}
{{- if $file.featureGates -}}
{{- $gates := default (dict) $v.featureGates -}}
{{- range $name, $on := $file.featureGates -}}
{{- if not (hasKey $gates $name) -}}
{{- $_ := set $gates $name $on -}}
{{- end -}}
{{- end -}}
{{- $_ := set $v "featureGates" $gates -}}
{{- end -}}
{{- $rest := omit $file "apiVersion" "kind" "namespace" "featureGates" "integrations" -}}
{{- $_ := set $v "kueueConfiguration" $rest -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
A map of labels as "key=value" pairs, sorted, comma-separated (policy messages).
*/}}
{{- define "kueue-timeshare.labelList" -}}
{{- $out := list -}}
{{- range $k := keys . | sortAlpha -}}
{{- $out = append $out (printf "%s=%s" $k (index $ $k)) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end -}}
