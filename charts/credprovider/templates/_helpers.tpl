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

{{/* The host directories the agent writes in (mode files): its own, the bin dir itself and the
config's directory, each unless inside its own. */}}
{{- define "credprovider.hostDirs" -}}
{{- $home := "/var/lib/credprovider" -}}
- {{ $home }}
{{- range list (clean .Values.paths.binDir) (dir (clean .Values.paths.config)) | uniq }}
{{- if not (or (eq . $home) (hasPrefix (printf "%s/" $home) .)) }}
- {{ . }}
{{- end -}}
{{- end -}}
{{- end -}}
