{{/* The pod template shared by the DaemonSet and the Deployment. */}}
{{- define "ipgate.podTemplate" -}}
metadata:
  labels:
    {{- include "ipgate.selectorLabels" . | nindent 4 }}
    app.kubernetes.io/component: controller
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # Roll the pods when the rendered config changes (ipgate applies only allowlists live). The
    # entries of source: config lists are in their own ConfigMap, outside this checksum.
    checksum/config: {{ include "ipgate.config" . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "ipgate.serviceAccountName" . }}
  # The token is needed: ipgate reads and watches its allowlist ConfigMap through the API.
  automountServiceAccountToken: true
  {{- if .Values.hostNetwork }}
  hostNetwork: true
  # Without this, a hostNetwork pod resolves names with the node's resolv.conf, not cluster DNS.
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  {{- with .Values.dnsConfig }}
  dnsConfig:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.podSecurityContext }}
  securityContext:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.initContainers }}
  initContainers:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: ipgate
      image: {{ include "ipgate.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - run
        - --config
        - /etc/ipgate/config.yaml
        {{- with .Values.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        - name: IPGATE_ADMIN_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ include "ipgate.adminSecretName" . }}
              key: {{ include "ipgate.adminSecretKey" . }}
        # store.namespace is null in config.yaml: the store uses the pod's own namespace.
        - name: POD_NAMESPACE
          valueFrom:
            fieldRef:
              fieldPath: metadata.namespace
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        - name: NODE_NAME
          valueFrom:
            fieldRef:
              fieldPath: spec.nodeName
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        {{- $admin := include "ipgate.adminListen" . }}
        {{- if include "ipgate.adminBindsPodIP" . }}
        # The admin API on the pod IP only: with hostNetwork that is the node's primary address, so
        # the admin port is not on every node address (0.0.0.0 would be). The variable replaces
        # config.yaml's admin.listen in an ipgate that reads it (docs/kubernetes.md).
        - name: IPGATE_ADMIN_LISTEN
          value: {{ $admin | quote }}
        {{- end }}
        # Where `ipgate allowlist ...` run in this container (kubectl exec) finds the admin API.
        - name: IPGATE_ADMIN_URL
          value: {{ printf "http://%s" (include "ipgate.adminLocalAddress" .) | quote }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- with .Values.extraEnvFrom }}
      envFrom:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      ports:
        {{- range .Values.listeners }}
        - name: {{ .name }}
          containerPort: {{ .port }}
          protocol: TCP
        {{- end }}
        - name: admin
          containerPort: {{ .Values.admin.port }}
          protocol: TCP
      readinessProbe:
        httpGet:
          path: /readyz
          port: admin
        periodSeconds: {{ .Values.probes.readiness.periodSeconds }}
        failureThreshold: {{ .Values.probes.readiness.failureThreshold }}
        timeoutSeconds: {{ .Values.probes.readiness.timeoutSeconds }}
      livenessProbe:
        httpGet:
          path: /healthz
          port: admin
        periodSeconds: {{ .Values.probes.liveness.periodSeconds }}
        failureThreshold: {{ .Values.probes.liveness.failureThreshold }}
        timeoutSeconds: {{ .Values.probes.liveness.timeoutSeconds }}
      startupProbe:
        httpGet:
          path: /healthz
          port: admin
        periodSeconds: {{ .Values.probes.startup.periodSeconds }}
        failureThreshold: {{ .Values.probes.startup.failureThreshold }}
      {{- if gt (int .Values.preStopSleepSeconds) 0 }}
      lifecycle:
        # Endpoint removal reaches kube-proxy (and load balancers) a moment after the pod is marked
        # terminating; waiting here keeps ipgate accepting until no new connection is sent to it.
        preStop:
          {{- if semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version }}
          # The kubelet's own sleep (Kubernetes >= 1.30): no process in the container.
          sleep:
            seconds: {{ .Values.preStopSleepSeconds }}
          {{- else }}
          # Older clusters: the image's coreutils sleep (node:*-bookworm-slim has /bin/sleep).
          exec:
            command: ["/bin/sleep", {{ .Values.preStopSleepSeconds | quote }}]
          {{- end }}
      {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      {{- with include "ipgate.containerSecurityContext" . | fromYaml }}
      securityContext:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      volumeMounts:
        - name: config
          mountPath: /etc/ipgate
          readOnly: true
        # Writable paths on a read-only root filesystem.
        - name: data
          mountPath: /var/lib/ipgate
        - name: tmp
          mountPath: /tmp
        {{- /* Each TLS Secret's directory, never a subPath (a subPath mount is never updated): a
               renewal swaps the volume's ..data link and ipgate reloads the changed files. Nested in
               the config volume's /etc/ipgate: the kubelet creates the mount point there. */}}
        {{- range .Values.tls.secrets }}
        - name: tls-{{ if regexMatch "^[a-z0-9]([-a-z0-9]{0,57}[a-z0-9])?$" .name }}{{ .name }}{{ else }}{{ sha256sum .name | trunc 16 }}{{ end }}
          mountPath: /etc/ipgate/tls/{{ .name }}
          readOnly: true
        {{- end }}
        {{- with .Values.extraVolumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    {{- with .Values.extraContainers }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  volumes:
    # config.yaml only: the entries of source: config lists are read and watched through the API
    # (allowlist-declared-configmap.yaml), not mounted.
    - name: config
      configMap:
        name: {{ include "ipgate.suffixed" (list . "config") }}
        items:
          - key: config.yaml
            path: config.yaml
    - name: data
      emptyDir:
        sizeLimit: 64Mi
    - name: tmp
      emptyDir:
        medium: Memory
        sizeLimit: 16Mi
    {{- range .Values.tls.secrets }}
    {{- /* A volume name is a DNS label (63): a Secret name with a dot, or longer, is hashed. */}}
    - name: tls-{{ if regexMatch "^[a-z0-9]([-a-z0-9]{0,57}[a-z0-9])?$" .name }}{{ .name }}{{ else }}{{ sha256sum .name | trunc 16 }}{{ end }}
      secret:
        secretName: {{ .secretName }}
        defaultMode: {{ int $.Values.tls.defaultMode }}
    {{- end }}
    {{- with .Values.extraVolumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if eq .Values.kind "Deployment" }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- end }}
{{- end -}}
