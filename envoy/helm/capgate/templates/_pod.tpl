{{/*
capgate's part of a pod, as named templates: the chart's own Deployment (form: pod) includes
them, and so does a chart of yours that adds capgate to a workload it already has (form: sidecar;
docs/deploy.md, "A sidecar for a workload you already run"). Each takes the capgate chart's
context: `.` here, `.Subcharts.capgate` in a parent chart.

  capgate.containers          Envoy (mode: envoy) and capgate, a list of container specs
  capgate.volumes             the volumes they mount, a list
  capgate.podSecurityContext  the pod securityContext they need (fsGroup 65532: Envoy reaches
                              capgate's sockets, capgate reads its Secrets, through that group)
  capgate.checksum            a checksum of the ConfigMaps, for a pod annotation that rolls the
                              pods when config, manifests or bootstrap change
  capgate.servicePort         the Service port entry: the traffic goes to Envoy (or, mode: istio,
                              to capgate's gateway), never to the agent's own port
*/}}

{{- define "capgate.podSecurityContext" -}}
runAsNonRoot: true
seccompProfile:
  type: RuntimeDefault
# Every container gets this supplementary group and the emptyDir volumes belong to it:
# capgate creates its sockets mode 0660 in capgate-sockets, and Envoy (another user)
# connects to them as a member of the group.
fsGroup: 65532
{{- end -}}

{{- define "capgate.checksum" -}}
{{ include "capgate.configMaps" . | sha256sum }}
{{- end -}}

{{- define "capgate.servicePort" -}}
- name: http
  port: {{ .Values.service.port }}
  targetPort: a2a      # {{ if eq (include "capgate.mode" .) "envoy" }}envoy container port {{ .Values.envoy.port }}, the bootstrap's listener{{ else }}capgate's gateway, port {{ .Values.istio.gatewayPort }}{{ end }}
  protocol: TCP
  appProtocol: http
{{- end -}}

{{- define "capgate.containers" -}}
{{- $mode := include "capgate.mode" . -}}
{{- if eq $mode "envoy" }}
- name: envoy
  image: {{ include "capgate.imageRef" (dict "image" .Values.envoy.image "tag" "") }}
  imagePullPolicy: {{ .Values.envoy.image.pullPolicy }}
  args:
    - -c
    - /etc/envoy/bootstrap.yaml
    # No shared memory for hot restart: a restart is a new container.
    - --disable-hot-restart
    - --log-level
    - {{ .Values.envoy.logLevel }}
    # The preStop drain: listeners stay open while the endpoint leaves the Service,
    # and every connection is asked to close at once.
    - --drain-time-s
    - {{ .Values.envoy.drainTimeSeconds | quote }}
    - --drain-strategy
    - immediate
  ports:
    - name: a2a
      containerPort: {{ .Values.envoy.port }}
      protocol: TCP
    # Envoy's Prometheus metrics (the bootstrap's stats listener: GET /stats/prometheus only).
    - name: envoy-stats
      containerPort: {{ .Values.envoy.statsPort }}
      protocol: TCP
  lifecycle:
    preStop:
      exec:
        # The envoy image has no curl; perl talks HTTP to the admin socket. A failed
        # drain still sleeps, so capgate and the agent outlive Envoy either way.
        command:
          - /bin/sh
          - -c
          - |
            perl -MIO::Socket::UNIX -e '
              my $s = IO::Socket::UNIX->new(Peer => "/var/run/envoy/admin.sock") or exit 1;
              print $s "POST /drain_listeners?graceful&skip_exit HTTP/1.1\r\nHost: envoy\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
              my $status = <$s> // "";
              exit($status =~ m{^HTTP/1\.1 200 } ? 0 : 1)'
            sleep {{ .Values.envoy.preStopSleepSeconds }}
  # Envoy's admin (/ready) is a Unix socket, out of the kubelet's reach; the listener
  # accepting connections is the readiness signal.
  readinessProbe:
    tcpSocket:
      port: a2a
    periodSeconds: 5
  livenessProbe:
    tcpSocket:
      port: a2a
    initialDelaySeconds: 10
    periodSeconds: 10
  # The bootstrap's fixed_heap overload monitor budgets 384 MiB of heap, 75% of the
  # default limit: Envoy refuses new requests before the kernel would kill it.
  resources:
    {{- toYaml .Values.envoy.resources | nindent 4 }}
  securityContext:
    runAsUser: 101          # the image's envoy user
    runAsGroup: 101
    runAsNonRoot: true
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
  volumeMounts:
    - name: envoy-bootstrap
      mountPath: /etc/envoy
      readOnly: true
    - name: envoy-admin
      mountPath: /var/run/envoy
    - name: capgate-sockets
      mountPath: /var/run/capgate
    - name: envoy-tmp
      mountPath: /tmp
{{- end }}
- name: capgate
  image: {{ include "capgate.imageRef" (dict "image" .Values.image "tag" .Chart.AppVersion) }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  # The image's entrypoint is /capgate.
  args:
    - serve
    - --config
    - /etc/capgate/capgate.yaml
    - --shutdown-timeout
    - {{ .Values.shutdownTimeout }}
    - --log-level
    - {{ .Values.logLevel }}
    {{- with .Values.bundle }}
    {{- if .url }}
    - --bundle
    - {{ .url | quote }}
    - --bundle-poll
    - {{ .poll }}
    {{- if .verificationKey }}
    - --bundle-verification-key
    - /etc/capgate/bundle-key.pem
    {{- end }}
    {{- end }}
    {{- end }}
  {{- with .Values.env }}
  env:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.envFrom }}
  envFrom:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  # Keep serving Envoy while it drains; SIGTERM comes after.
  lifecycle:
    preStop:
      sleep: {seconds: {{ .Values.preStopSleepSeconds }}}
  ports:
    {{- if eq $mode "istio" }}
    - name: a2a
      containerPort: {{ .Values.istio.gatewayPort }}
      protocol: TCP
    {{- end }}
    # a2a and extauthz are Unix sockets with Envoy; the admin port is declared.
    - name: admin
      containerPort: {{ .Values.adminPort }}
      protocol: TCP
  readinessProbe:
    httpGet:
      path: /readyz
      port: admin
    {{- toYaml .Values.readinessProbe | nindent 4 }}
  livenessProbe:
    httpGet:
      path: /healthz
      port: admin
    {{- toYaml .Values.livenessProbe | nindent 4 }}
  resources:
    {{- toYaml .Values.resources | nindent 4 }}
  securityContext:
    runAsUser: 65532
    runAsGroup: 65532
    runAsNonRoot: true
    readOnlyRootFilesystem: true
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
  volumeMounts:
    - name: capgate-config
      mountPath: /etc/capgate
      readOnly: true
    {{- if eq $mode "envoy" }}
    - name: capgate-sockets
      mountPath: /var/run/capgate
    {{- end }}
    - name: capgate-tmp
      mountPath: /tmp
    {{- if .Values.manifests.configMap }}
    - name: capgate-manifests
      mountPath: {{ include "capgate.manifestsDir" . }}
      readOnly: true
    {{- end }}
    {{- with .Values.extraVolumeMounts }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{- define "capgate.volumes" -}}
{{- $mode := include "capgate.mode" . -}}
{{- if eq $mode "envoy" }}
- name: envoy-bootstrap
  configMap:
    name: {{ include "capgate.fullname" . }}-envoy-bootstrap
{{- end }}
# capgate.yaml at the root and the manifests under manifests/ (JWKS under jwks/), in one
# read-only directory, so capgate.yaml's relative paths resolve.
- name: capgate-config
  projected:
    sources:
      - configMap:
          name: {{ include "capgate.fullname" . }}-config
          items:
            - key: capgate.yaml
              path: capgate.yaml
            {{- range $name, $_ := .Values.jwks }}
            - key: jwks-{{ $name }}.json
              path: jwks/{{ $name }}.json
            {{- end }}
            {{- if .Values.bundle.verificationKey }}
            - key: bundle-key.pem
              path: bundle-key.pem
            {{- end }}
      # The admin token (listen.admin_token_file), readable by capgate's group only.
      - secret:
          name: {{ include "capgate.adminTokenSecret" . }}
          items:
            - key: {{ .Values.adminToken.key }}
              path: {{ include "capgate.adminTokenPath" . }}
              mode: 0440
      {{- with .Values.signingKey.existingSecret }}
      # The token-signing key (identity.signing_key_file), the same in every replica.
      - secret:
          name: {{ . }}
          items:
            - key: {{ $.Values.signingKey.key }}
              path: {{ include "capgate.signingKeyPath" $ }}
              mode: 0440
      {{- end }}
      {{- if not (or .Values.bundle.url .Values.manifests.configMap) }}
      - configMap:
          name: {{ include "capgate.fullname" . }}-manifests
          items:
            {{- range $name, $_ := get .Values.manifests "files" }}
            - key: {{ $name }}.yaml
              path: manifests/{{ $name }}.yaml
            {{- end }}
      {{- end }}
{{- if eq $mode "envoy" }}
# Envoy's admin socket: mounted by the envoy container only.
- name: envoy-admin
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
# capgate's gateway and ext_authz sockets: mounted by envoy and capgate, not the agent.
- name: capgate-sockets
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
- name: envoy-tmp
  emptyDir: {sizeLimit: 16Mi}
{{- end }}
- name: capgate-tmp
  emptyDir: {sizeLimit: 64Mi}
{{- with .Values.manifests.configMap }}
# The manifests of a ConfigMap of yours (manifests.configMap), every key a manifest.
- name: capgate-manifests
  configMap:
    name: {{ . }}
{{- end }}
{{- end -}}
