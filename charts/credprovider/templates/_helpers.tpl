{{- define "credprovider.image" -}}
{{- if not .Values.image.repository -}}
{{- fail "image.repository is required: where make release REGISTRY=... pushed the image" -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end -}}

{{- define "credprovider.bundle" -}}
/credprovider-{{ .Chart.AppVersion }}
{{- end -}}

{{/* The host directories the agent writes in: the config's, the bin dir's parent, its own. */}}
{{- define "credprovider.hostDirs" -}}
{{- $dirs := list (dir .Values.paths.config) (dir .Values.paths.binDir) "/var/lib/credprovider" -}}
{{- range $dirs | uniq }}
- {{ . }}
{{- end -}}
{{- end -}}
