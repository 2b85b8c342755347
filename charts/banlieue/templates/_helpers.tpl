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

{{- define "banlieue.systemNamespace" -}}banlieue-system{{- end }}
{{- define "banlieue.buildNamespace" -}}banlieue-imagebuild{{- end }}
