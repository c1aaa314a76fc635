{{/* The release's name (the agent's), unless fullnameOverride. */}}
{{- define "capgate.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable across upgrades (Kubernetes' recommended name and instance). */}}
{{- define "capgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "capgate.fullname" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* pod: the chart renders the agent's whole Deployment; sidecar: only capgate's part (docs/deploy.md). */}}
{{- define "capgate.pod" -}}
{{- if eq .Values.form "pod" }}true{{ else if eq .Values.form "sidecar" }}{{ else }}{{ fail "form must be pod or sidecar" }}{{ end -}}
{{- end -}}

{{/* The labels selecting the pods capgate runs in: the chart's, or (form: sidecar) your workload's. */}}
{{- define "capgate.podSelector" -}}
{{- if include "capgate.pod" . -}}
{{ include "capgate.selectorLabels" . }}
{{- else -}}
{{- if not .Values.sidecar.podLabels }}{{ fail "form: sidecar needs sidecar.podLabels: the labels of your workload's pods, which the NetworkPolicy and Istio's AuthorizationPolicy select" }}{{ end -}}
{{ toYaml .Values.sidecar.podLabels }}
{{- end -}}
{{- end -}}

{{- define "capgate.labels" -}}
{{ include "capgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: capgate
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}

{{/* An image reference: repository@digest when a digest is set, else repository:tag. */}}
{{- define "capgate.imageRef" -}}
{{- if .image.digest -}}
{{- if not (hasPrefix "sha256:" .image.digest) }}{{ fail "image.digest must be sha256:<hex>" }}{{ end -}}
{{ .image.repository }}@{{ .image.digest }}
{{- else -}}
{{ .image.repository }}:{{ .image.tag | default .tag }}
{{- end -}}
{{- end -}}

{{- define "capgate.mode" -}}
{{- if not (has .Values.mode (list "envoy" "istio")) }}{{ fail "mode must be envoy or istio" }}{{ end -}}
{{ .Values.mode }}
{{- end -}}

{{/* capgate's listen addresses: Unix sockets for Envoy, or the gateway on a port for istio-proxy. */}}
{{- define "capgate.listen" -}}
{{- if eq (include "capgate.mode" .) "envoy" -}}
a2a: unix:/var/run/capgate/a2a.sock
extauthz: unix:/var/run/capgate/extauthz.sock
{{- else -}}
a2a: 0.0.0.0:{{ .Values.istio.gatewayPort }}
extauthz: 127.0.0.1:{{ .Values.istio.extauthzPort }}
{{- end }}
admin: 0.0.0.0:{{ .Values.adminPort }}
admin_token_file: {{ include "capgate.adminTokenPath" . }}
{{- end -}}

{{/* The admin token's Secret: adminToken.existingSecret, else the one secret.yaml generates. */}}
{{- define "capgate.adminTokenSecret" -}}
{{- .Values.adminToken.existingSecret | default (printf "%s-admin-token" (include "capgate.fullname" .)) -}}
{{- end -}}

{{/* Where manifests.configMap is mounted: beside /etc/capgate, as ../capgate-manifests from capgate.yaml. */}}
{{- define "capgate.manifestsDir" -}}
/etc/capgate-manifests
{{- end -}}

{{/* Where the signing key is projected, relative to /etc/capgate. */}}
{{- define "capgate.signingKeyPath" -}}
secrets/signing-key.pem
{{- end -}}

{{/* Where the admin token is projected, relative to /etc/capgate (capgate.yaml's folder). */}}
{{- define "capgate.adminTokenPath" -}}
secrets/admin-token
{{- end -}}

{{/* capgate.yaml: config with listen and manifests set by the chart. */}}
{{- define "capgate.configYAML" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- if hasKey $cfg "listen" }}{{ fail "config.listen is set by the chart (mode, adminPort, istio.*)" }}{{ end -}}
{{- if hasKey $cfg "manifests" }}{{ fail "config.manifests is set by the chart (manifests.files)" }}{{ end -}}
{{- $agent := get $cfg "agent" | default dict -}}
{{- if not (and (get $agent "name") (get $agent "description") (get $agent "version") (get $agent "url")) -}}
{{- fail "config.agent is not set: give the agent's card identity, config.agent.name, description, version and url (docs/configuration.md; envoy/helm/capgate/examples/finance.values.yaml shows the form)" -}}
{{- end -}}
{{- $_ := set $cfg "listen" (include "capgate.listen" . | fromYaml) -}}
{{- if .Values.signingKey.existingSecret -}}
{{- $identity := get $cfg "identity" | default dict -}}
{{- if get $identity "signing_key_file" }}{{ fail "config.identity.signing_key_file and signingKey.existingSecret are both set: give the key one way" }}{{ end -}}
{{- $_ := set $identity "signing_key_file" (include "capgate.signingKeyPath" .) -}}
{{- $_ := set $cfg "identity" $identity -}}
{{- end -}}
{{- if gt (int .Values.replicas) 1 -}}
{{- if not (get (get $cfg "identity" | default dict) "signing_key_file") -}}
{{- fail "replicas > 1 needs a shared signing key: set signingKey.existingSecret to a Secret holding a PEM P-256 private key (or config.identity.signing_key_file to one you mount), the same in every replica; without it each pod signs with its own key and refuses the others' handler and page tokens (docs/operations.md)" -}}
{{- end -}}
{{- end -}}
{{- if .Values.bundle.url -}}
{{- /* The bundle's capabilities are served; the config must still name a folder that exists. */ -}}
{{- $_ := set $cfg "manifests" (list ".") -}}
{{- else if .Values.manifests.configMap -}}
{{- if get .Values.manifests "files" }}{{ fail "manifests.files and manifests.configMap are both set: give the manifests one way" }}{{ end -}}
{{- $_ := set $cfg "manifests" (list (printf "..%s" (trimPrefix "/etc" (include "capgate.manifestsDir" .)))) -}}
{{- else if get .Values.manifests "files" -}}
{{- $_ := set $cfg "manifests" (list "manifests") -}}
{{- else -}}
{{- fail "no capability to serve: manifests.files is empty and bundle.url is not set. Give one capability manifest per key, manifests.files.<name> (--set-file manifests.files.<name>=path/to/manifest.yaml, or in a values file as envoy/helm/capgate/examples/finance.values.yaml does), or manifests.configMap (a ConfigMap of yours, one manifest per key), or bundle.url" -}}
{{- end -}}
{{ toYaml $cfg }}
{{- end -}}

{{- define "capgate.bootstrap" -}}
{{ .Values.envoy.bootstrap | default (.Files.Get "files/bootstrap.yaml") }}
{{- end -}}
