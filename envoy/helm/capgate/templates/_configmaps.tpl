{{/* The ConfigMaps capgate and Envoy mount (configmap.yaml renders them; capgate.checksum sums them). */}}
{{- define "capgate.configMaps" -}}
# capgate.yaml at the root of /etc/capgate, with the JWKS files and the bundle's verification key.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "capgate.fullname" . }}-config
  labels:
    {{- include "capgate.labels" . | nindent 4 }}
data:
  capgate.yaml: |
    {{- include "capgate.configYAML" . | nindent 4 }}
  {{- range $name, $jwks := .Values.jwks }}
  jwks-{{ $name }}.json: {{ $jwks | toString | quote }}
  {{- end }}
  {{- if .Values.bundle.verificationKey }}
  bundle-key.pem: |
    {{- .Values.bundle.verificationKey | trimSuffix "\n" | nindent 4 }}
  {{- end }}
{{- if not (or .Values.bundle.url .Values.manifests.configMap) }}
---
# The capability manifests, projected into /etc/capgate/manifests.
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "capgate.fullname" . }}-manifests
  labels:
    {{- include "capgate.labels" . | nindent 4 }}
data:
  {{- range $name, $m := get .Values.manifests "files" }}
  {{ $name }}.yaml: |
    {{- $m | trimSuffix "\n" | nindent 4 }}
  {{- end }}
{{- end }}
{{- if eq (include "capgate.mode" .) "envoy" }}
---
# Envoy's bootstrap (envoy/bootstrap.yaml unless envoy.bootstrap).
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ include "capgate.fullname" . }}-envoy-bootstrap
  labels:
    {{- include "capgate.labels" . | nindent 4 }}
data:
  bootstrap.yaml: |
    {{- include "capgate.bootstrap" . | trimSuffix "\n" | nindent 4 }}
{{- end }}
{{- end -}}
