{{/* Chart name. */}}
{{- define "ipgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Full name: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "ipgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A name with a suffix, kept within 63 characters. */}}
{{- define "ipgate.suffixed" -}}
{{- $suffix := index . 1 -}}
{{- printf "%s-%s" (include "ipgate.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix -}}
{{- end -}}

{{- define "ipgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Selector labels: stable for the life of the release (a selector cannot change). */}}
{{- define "ipgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ipgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels on every resource. Call with (list $ "component"). */}}
{{- define "ipgate.labels" -}}
{{- $ := index . 0 -}}
helm.sh/chart: {{ include "ipgate.chart" $ }}
{{ include "ipgate.selectorLabels" $ }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
app.kubernetes.io/part-of: ipgate
{{- with $.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "ipgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ipgate.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ipgate.storeConfigMapName" -}}
{{- default (include "ipgate.suffixed" (list . "allowlists")) .Values.store.configMapName -}}
{{- end -}}

{{- define "ipgate.adminSecretName" -}}
{{- default (include "ipgate.suffixed" (list . "admin-token")) .Values.admin.existingSecret -}}
{{- end -}}

{{- define "ipgate.adminSecretKey" -}}
{{- if .Values.admin.existingSecret -}}{{ .Values.admin.existingSecretKey }}{{- else -}}token{{- end -}}
{{- end -}}

{{- define "ipgate.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* "host:port" for a bind address; IPv6 literals must come bracketed ("[::]"). */}}
{{- define "ipgate.hostPort" -}}
{{- printf "%s:%v" (index . 0) (index . 1) -}}
{{- end -}}

{{/* True ("true") when hostNetwork is on and a listener binds a port below 1024. */}}
{{- define "ipgate.needsNetBind" -}}
{{- $low := false -}}
{{- range .Values.listeners -}}{{- if lt (int .port) 1024 -}}{{- $low = true -}}{{- end -}}{{- end -}}
{{- if lt (int .Values.admin.port) 1024 -}}{{- $low = true -}}{{- end -}}
{{- if and .Values.hostNetwork $low -}}true{{- end -}}
{{- end -}}

{{/*
Checks values.schema.json cannot express (cross-field rules). Each failure names the field.
*/}}
{{- define "ipgate.validate" -}}
{{- $names := dict -}}
{{- $ports := dict -}}
{{- range $i, $l := .Values.listeners -}}
{{- if hasKey $names $l.name -}}
{{- fail (printf "listeners[%d].name: %q is used twice; listener names must be unique" $i $l.name) -}}
{{- end -}}
{{- if eq $l.name "admin" -}}
{{- fail (printf "listeners[%d].name: \"admin\" is the admin port's name; choose another listener name" $i) -}}
{{- end -}}
{{- if contains "--" $l.name -}}
{{- fail (printf "listeners[%d].name: %q must not contain \"--\" (it is a Kubernetes port name)" $i $l.name) -}}
{{- end -}}
{{- $_ := set $names $l.name true -}}
{{- $p := toString $l.port -}}
{{- if or (hasKey $ports $p) (eq (int $l.port) (int $.Values.admin.port)) -}}
{{- fail (printf "listeners[%d].port: %s is already used by another listener or by admin.port" $i $p) -}}
{{- end -}}
{{- $_ := set $ports $p true -}}
{{- if and (lt (int $l.port) 1024) (not $.Values.hostNetwork) -}}
{{- fail (printf "listeners[%d].port: %d is below 1024, which a non-root container cannot bind without hostNetwork; listen on a port >= 1024 and set listeners[%d].servicePort: %d" $i (int $l.port) $i (int $l.port)) -}}
{{- end -}}
{{- if not (hasKey $.Values.allowlists $l.allowlist) -}}
{{- fail (printf "listeners[%d].allowlist: %q is not defined under allowlists (defined: %s)" $i $l.allowlist (keys $.Values.allowlists | sortAlpha | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.hostNetwork (eq .Values.kind "Deployment") (gt (int .Values.replicaCount) 1) (not .Values.affinity) -}}
{{- fail "hostNetwork: two pods of a Deployment on one node would fight over the same host ports; use kind: DaemonSet, or set affinity (pod anti-affinity per node)" -}}
{{- end -}}
{{- $drainMs := int .Values.config.shutdown.drainTimeoutMs -}}
{{- if lt (mul (int .Values.terminationGracePeriodSeconds) 1000) (add $drainMs (mul (int .Values.preStopSleepSeconds) 1000)) -}}
{{- fail (printf "terminationGracePeriodSeconds: %d s is shorter than preStopSleepSeconds (%d s) + config.shutdown.drainTimeoutMs (%d ms): pods would be killed while draining" (int .Values.terminationGracePeriodSeconds) (int .Values.preStopSleepSeconds) $drainMs) -}}
{{- end -}}
{{- end -}}
