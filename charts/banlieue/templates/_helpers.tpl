{{/* Labels every object carries. part-of is what config/default sets too. */}}
{{- define "banlieue.labels" -}}
app.kubernetes.io/part-of: banlieue
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* repository:tag[@digest] */}}
{{- define "banlieue.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- with .Values.image.digest }}@{{ . }}{{ end -}}
{{- end }}

{{/*
The roles run in the release namespace (`helm install -n`; the chart renders no Namespace for
it: `--create-namespace` or an existing one). The build namespace is a fixed name: the
ClusterRoles' namespaced Roles, the admission policies and the binaries' --build-namespace
default all name it (ADR-0114). The roles may not share it: its policies hold every provider
account there, and its Pod Security level is the build Jobs'.
*/}}
{{- define "banlieue.systemNamespace" -}}
{{- if eq .Release.Namespace (include "banlieue.buildNamespace" .) }}
{{- fail (printf "the release namespace may not be %s, the build namespace: install into another (e.g. helm install -n banlieue-system --create-namespace)" .Release.Namespace) }}
{{- end }}
{{- .Release.Namespace }}
{{- end }}
{{- define "banlieue.buildNamespace" -}}banlieue-imagebuild{{- end }}

{{/* "true" when the default ProviderClass is rendered (templates/providerclass.yaml). */}}
{{- define "banlieue.renderProviderClass" -}}
{{- if and .Values.providerClass.create (or (not .Values.crds.enabled) (.Capabilities.APIVersions.Has "banlieue.io/v1alpha1/ProviderClass")) }}true{{ end }}
{{- end }}

{{/* A NetworkPolicy rule to (egress) or from (.dir "from", ingress) the CIDRs of .cidrs on .ports (.proto). */}}
{{- define "banlieue.netpol.cidrRule" -}}
- {{ .dir | default "to" }}:
  {{- range .cidrs }}
  - ipBlock:
      cidr: {{ . | quote }}
  {{- end }}
  ports:
  {{- range .ports }}
  - protocol: {{ $.proto }}
    port: {{ . }}
  {{- end }}
{{- end }}

{{/* Egress to the cluster's DNS (networkPolicy.dns). */}}
{{- define "banlieue.netpol.dns" -}}
- to:
  {{- toYaml .dns.to | nindent 2 }}
  ports:
  - protocol: UDP
    port: 53
  - protocol: TCP
    port: 53
{{- end }}

{{/* Ingress from the scrapers (networkPolicy.metricsFrom) on the metrics port. */}}
{{- define "banlieue.netpol.metrics" -}}
- from:
  {{- toYaml .metricsFrom | nindent 2 }}
  ports:
  - protocol: TCP
    port: 8080
{{- end }}

{{/*
The Secret holding the metrics serving certificate (tls.crt, tls.key, ca.crt) the roles present
and the ServiceMonitor verifies; empty when the ServiceMonitor is off (the roles then generate
their own in memory).
*/}}
{{- define "banlieue.metricsCertSecret" -}}
{{- $mon := .Values.monitoring | default dict }}
{{- if dig "serviceMonitor" "enabled" false $mon }}
{{- dig "serviceMonitor" "certificate" "secretName" "" $mon | default "banlieue-metrics-serving" }}
{{- end }}
{{- end }}

{{/* The name the metrics certificate is for, which the ServiceMonitor asks for (serverName). */}}
{{- define "banlieue.metricsServerName" -}}
banlieue-metrics.{{ include "banlieue.systemNamespace" . }}.svc
{{- end }}
