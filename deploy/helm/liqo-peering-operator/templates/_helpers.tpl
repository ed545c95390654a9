{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "liqo-peering-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of the release's objects: the release name, plus the chart name unless it already has it. */}}
{{- define "liqo-peering-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "liqo-peering-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "liqo-peering-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "liqo-peering-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "liqo-peering-operator.labels" -}}
helm.sh/chart: {{ include "liqo-peering-operator.chart" . }}
{{ include "liqo-peering-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: liqo-peering-operator
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "liqo-peering-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "liqo-peering-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* kopf peering object name (--peering-name). */}}
{{- define "liqo-peering-operator.peeringName" -}}
{{- default (include "liqo-peering-operator.fullname" .) .Values.ha.peeringName }}
{{- end }}

{{/* The image: by digest when image.digest is set (immutable), else by tag. The chart as committed names no
image (a packaged release sets one): without image.repository it refuses to render rather than install a
Deployment whose Pod can never pull. */}}
{{- define "liqo-peering-operator.image" -}}
{{- $repository := required "image.repository is not set: this chart names no image of its own. Build the operator's image from the Dockerfile, push it to a registry your cluster pulls from, and set image.repository and image.tag (or image.digest); or install a chart that `make release` packaged, which sets them. See docs/installation.md." .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* "true" when HA runs more than one replica: a PodDisruptionBudget and the default anti-affinity then apply. */}}
{{- define "liqo-peering-operator.highlyAvailable" -}}
{{- if and .Values.ha.enabled (gt (int .Values.replicaCount) 1) }}true{{ end }}
{{- end }}

{{/* Replicas, refusing several replicas without kopf peering. */}}
{{- define "liqo-peering-operator.replicas" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.ha.enabled) }}
{{- fail "replicaCount > 1 needs ha.enabled=true: without kopf peering every replica would reconcile every LiqoPeering" }}
{{- end }}
{{- .Values.replicaCount }}
{{- end }}

{{/* "true" when secret-policy.yaml's ValidatingAdmissionPolicy is installed: a grant it confines depends on it. */}}
{{- define "liqo-peering-operator.secretPolicy" -}}
{{- if and .Values.rbac.create .Values.rbac.secretPolicy (semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version) }}true{{ end }}
{{- end }}
