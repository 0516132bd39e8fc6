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
    # Roll the pods when the rendered config changes (ipgate reads its config once, at start).
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
  terminationGracePeriodSeconds: {{ .Values.terminationGracePeriodSeconds }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    runAsNonRoot: true
    runAsUser: 10001
    runAsGroup: 10001
    fsGroup: 10001
    seccompProfile:
      type: RuntimeDefault
  containers:
    - name: ipgate
      image: {{ include "ipgate.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args: ["run", "--config", "/etc/ipgate/config.yaml"]
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
        {{- with .Values.extraEnv }}
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
      {{- if and (gt (int .Values.preStopSleepSeconds) 0) (semverCompare ">=1.30-0" .Capabilities.KubeVersion.Version) }}
      lifecycle:
        # Let endpoint removal reach kube-proxy before ipgate stops accepting. The sleep action needs
        # no shell or binary in the image (Kubernetes >= 1.30; older clusters get no preStop hook).
        preStop:
          sleep:
            seconds: {{ .Values.preStopSleepSeconds }}
      {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        runAsNonRoot: true
        runAsUser: 10001
        runAsGroup: 10001
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        privileged: false
        seccompProfile:
          type: RuntimeDefault
        capabilities:
          drop: ["ALL"]
          {{- if include "ipgate.needsNetBind" . }}
          # hostNetwork with a port below 1024. Kubernetes grants no ambient capabilities, so a
          # non-root process only gets it through a file capability: use the image built with
          # --build-arg NET_BIND_SERVICE=1 (docs/kubernetes.md).
          add: ["NET_BIND_SERVICE"]
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
  volumes:
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
