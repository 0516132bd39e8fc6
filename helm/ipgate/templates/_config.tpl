{{/*
The ipgate config file (config.yaml), built as a dict and serialised with toYaml so every value is
quoted correctly. Its shape is ipgate's own schema (src/schema/config.ts); the chart tests parse the
rendered file with ipgate's parseConfig.
*/}}
{{- define "ipgate.config" -}}
{{- $listeners := list -}}
{{- range .Values.listeners -}}
{{- /* Chart-only keys stay out of ipgate's config. */ -}}
{{- $l := omit . "port" "servicePort" "nodePort" "allowTrustAll" -}}
{{- $_ := set $l "listen" (include "ipgate.hostPort" (list $.Values.listenAddress .port)) -}}
{{- $listeners = append $listeners $l -}}
{{- end -}}
{{- /* The admin Service's DNS names: clients in the cluster address the admin API by them. */ -}}
{{- $svc := include "ipgate.suffixed" (list . "admin") -}}
{{- $ns := .Release.Namespace -}}
{{- $hosts := list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.%s" $svc $ns .Values.clusterDomain) -}}
{{- $hosts = concat $hosts .Values.admin.extraAllowedHosts | uniq -}}
{{- /* source: config lists point at their key of the lists ConfigMap, which ipgate watches through
     the API; their entries are not in config.yaml, so an edit of them does not change this file or
     the pod template's checksum. configMap.namespace null: the pod's own (POD_NAMESPACE). */ -}}
{{- $allowlists := dict -}}
{{- range $name, $list := .Values.allowlists -}}
{{- if and (kindIs "map" $list) (eq (toString $list.source) "config") -}}
{{- $decl := dict "source" "config" "configMap" (dict "name" (include "ipgate.listsConfigMapName" $) "key" (printf "%s.yaml" $name) "namespace" nil) -}}
{{- if hasKey $list "allowTemporary" -}}{{- $_ := set $decl "allowTemporary" $list.allowTemporary -}}{{- end -}}
{{- $_ := set $allowlists $name $decl -}}
{{- else -}}
{{- $_ := set $allowlists $name $list -}}
{{- end -}}
{{- end -}}
{{- $config := dict
  "workers" .Values.config.workers
  "logging" .Values.config.logging
  "admin" (dict
    "listen" (include "ipgate.hostPort" (list (include "ipgate.adminWildcard" .) .Values.admin.port))
    "tokenFile" nil
    "tokenEnv" "IPGATE_ADMIN_TOKEN"
    "bodyLimit" .Values.admin.bodyLimit
    "separateProcess" .Values.admin.separateProcess
    "allowedHosts" $hosts)
  "store" (dict
    "type" "kubernetes"
    "namespace" nil
    "configMap" (include "ipgate.storeConfigMapName" .))
  "revokeLive" .Values.config.revokeLive
  "shutdown" .Values.config.shutdown
  "clusterNetworks" .Values.config.clusterNetworks
  "allowlists" $allowlists
  "listeners" $listeners
-}}
# Rendered by the ipgate Helm chart from its values; edit the values, not this ConfigMap.
# store.namespace null: the pod's own namespace (env POD_NAMESPACE).
{{- if include "ipgate.adminBindsPodIP" . }}
# admin.listen: IPGATE_ADMIN_LISTEN (the pod IP, set in the pod spec) replaces it where ipgate reads it.
{{- end }}
{{ toYaml $config }}
{{- end -}}
