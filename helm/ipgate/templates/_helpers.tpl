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

{{- /* The ConfigMap of the source: config lists (allowlist-declared-configmap.yaml). */ -}}
{{- define "ipgate.listsConfigMapName" -}}
{{- include "ipgate.suffixed" (list . "lists") -}}
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
The container securityContext: containerSecurityContext, plus NET_BIND_SERVICE when hostNetwork
binds a port below 1024. Kubernetes grants no ambient capabilities, so a non-root process only gets
it through a file capability: that needs the image built with --build-arg NET_BIND_SERVICE=1
(docs/kubernetes.md), and the capability in the bounding set, which this adds.
*/}}
{{- define "ipgate.containerSecurityContext" -}}
{{- $sc := deepCopy (default dict .Values.containerSecurityContext) -}}
{{- if include "ipgate.needsNetBind" . -}}
{{- $caps := default dict (get $sc "capabilities") -}}
{{- $add := without (default list (get $caps "add")) "NET_BIND_SERVICE" -}}
{{- $_ := set $caps "add" (append $add "NET_BIND_SERVICE") -}}
{{- $_ := set $sc "capabilities" $caps -}}
{{- end -}}
{{- if $sc -}}{{ toYaml $sc }}{{- end -}}
{{- end -}}

{{/*
True ("true") when the admin API binds the pod IP (IPGATE_ADMIN_LISTEN) instead of a wildcard:
`admin.bindAddress: podIP`, or `auto` with hostNetwork, where a wildcard would put the admin port
on every address of the node.
*/}}
{{- define "ipgate.adminBindsPodIP" -}}
{{- $b := .Values.admin.bindAddress -}}
{{- if or (eq $b "podIP") (and (eq $b "auto") .Values.hostNetwork) -}}true{{- end -}}
{{- end -}}

{{/* The pod IP as a host for host:port: IPv6 literals bracketed. */}}
{{- define "ipgate.podIPHost" -}}
{{- if eq .Values.admin.podIPFamily "IPv6" -}}[$(POD_IP)]{{- else -}}$(POD_IP){{- end -}}
{{- end -}}

{{/* admin.listen for config.yaml: the wildcard the admin API binds when it does not bind the pod IP. */}}
{{- define "ipgate.adminWildcard" -}}
{{- $b := .Values.admin.bindAddress -}}
{{- if or (eq $b "0.0.0.0") (eq $b "[::]") -}}{{ $b }}{{- else -}}0.0.0.0{{- end -}}
{{- end -}}

{{/* The admin address the container binds: `$(POD_IP):port` (expanded by the kubelet) or the wildcard. */}}
{{- define "ipgate.adminListen" -}}
{{- if include "ipgate.adminBindsPodIP" . -}}
{{- include "ipgate.hostPort" (list (include "ipgate.podIPHost" .) .Values.admin.port) -}}
{{- else -}}
{{- include "ipgate.hostPort" (list (include "ipgate.adminWildcard" .) .Values.admin.port) -}}
{{- end -}}
{{- end -}}

{{/* host:port a process inside the container uses to reach the admin API. */}}
{{- define "ipgate.adminLocalAddress" -}}
{{- if include "ipgate.adminBindsPodIP" . -}}
{{- include "ipgate.adminListen" . -}}
{{- else -}}
{{- include "ipgate.hostPort" (list "127.0.0.1" .Values.admin.port) -}}
{{- end -}}
{{- end -}}

{{/*
True ("true") when the pod's ports are ports of the node (hostNetwork): a second pod on the same
node could not bind them, so an update cannot surge.
*/}}
{{- define "ipgate.usesNodePorts" -}}
{{- if .Values.hostNetwork -}}true{{- end -}}
{{- end -}}

{{/*
The workload's update strategy. Under externalTrafficPolicy Local a node without a ready ipgate
drops its NodePort traffic, so the default starts the new pod beside the old one (maxSurge 1,
maxUnavailable 0: the old pod stops only once the new one is ready). With node ports (hostNetwork)
the new pod could not bind until the old one is gone: one pod at a time is replaced in place.
*/}}
{{- define "ipgate.updateStrategy" -}}
{{- if .Values.updateStrategy -}}
{{- toYaml .Values.updateStrategy -}}
{{- else if include "ipgate.usesNodePorts" . -}}
type: RollingUpdate
rollingUpdate:
  maxSurge: 0
  maxUnavailable: 1
{{- else -}}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- end -}}
{{- end -}}

{{/*
The eight 16-bit groups of an IPv6 address (the schema has checked its syntax), as a JSON list of
numbers: "::" expanded, an IPv4 tail read as two groups. Sprig parses no hexadecimal: digit by digit.
*/}}
{{- define "ipgate.ipv6Groups" -}}
{{- $hex := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 -}}
{{- $text := lower . -}}
{{- $tail := list -}}
{{- $last := last (splitList ":" $text) -}}
{{- if contains "." $last -}}
{{- $o := splitList "." $last -}}
{{- $tail = list (add (mul (atoi (index $o 0)) 256) (atoi (index $o 1))) (add (mul (atoi (index $o 2)) 256) (atoi (index $o 3))) -}}
{{- $text = trimSuffix $last $text -}}
{{- if and (hasSuffix ":" $text) (not (hasSuffix "::" $text)) -}}{{- $text = trimSuffix ":" $text -}}{{- end -}}
{{- end -}}
{{- $read := list -}}
{{- $halves := splitList "::" $text -}}
{{- range $halves -}}
{{- $nums := list -}}
{{- range compact (splitList ":" .) -}}
{{- $n := 0 -}}
{{- range splitList "" . -}}{{- $n = add (mul $n 16) (get $hex .) -}}{{- end -}}
{{- $nums = append $nums $n -}}
{{- end -}}
{{- $read = append $read $nums -}}
{{- end -}}
{{- $groups := index $read 0 -}}
{{- if eq (len $halves) 2 -}}
{{- $right := concat (index $read 1) $tail -}}
{{- range until (int (sub 8 (add (len $groups) (len $right)))) -}}{{- $groups = append $groups 0 -}}{{- end -}}
{{- $groups = concat $groups $right -}}
{{- else -}}
{{- $groups = concat $groups $tail -}}
{{- end -}}
{{- toJson $groups -}}
{{- end -}}

{{/*
A CIDR with host bits set (10.0.0.1/8) passes the schema's pattern but ipgate refuses it at
start, so the pod would crash-loop: refuse it here with the network address to write instead.
Call with (list "<field path>" "<cidr>"). The same for IPv6 (without the suggestion: writing the
compressed form is ipgate's job), and IPv4-mapped IPv6 CIDRs, which ipgate refuses too.
*/}}
{{- define "ipgate.checkCidr" -}}
{{- $path := index . 0 -}}
{{- $cidr := toString (index . 1) -}}
{{- if and (contains "/" $cidr) (not (contains ":" $cidr)) -}}
{{- $parts := splitList "/" $cidr -}}
{{- $prefix := atoi (index $parts 1) -}}
{{- $value := 0 -}}
{{- range splitList "." (index $parts 0) -}}{{- $value = add (mul $value 256) (atoi .) -}}{{- end -}}
{{- $size := 1 -}}
{{- range until (int (sub 32 $prefix)) -}}{{- $size = mul $size 2 -}}{{- end -}}
{{- $net := sub $value (mod $value $size) -}}
{{- if ne $net $value -}}
{{- fail (printf "%s: host bits set in %q: did you mean %d.%d.%d.%d/%d?" $path $cidr (div $net 16777216) (mod (div $net 65536) 256) (mod (div $net 256) 256) (mod $net 256) $prefix) -}}
{{- end -}}
{{- end -}}
{{- if and (contains "/" $cidr) (contains ":" $cidr) -}}
{{- $parts := splitList "/" $cidr -}}
{{- $prefix := atoi (index $parts 1) -}}
{{- $groups := include "ipgate.ipv6Groups" (index $parts 0) | fromJsonArray -}}
{{- range $i, $g := $groups -}}
{{- $hostBits := sub (mul (add $i 1) 16) $prefix -}}
{{- if gt (int $hostBits) 0 -}}
{{- $size := 1 -}}
{{- range until (int (min $hostBits 16)) -}}{{- $size = mul $size 2 -}}{{- end -}}
{{- if ne (mod (int $g) $size) 0 -}}
{{- fail (printf "%s: host bits set in %q: the address must be the first of its /%d" $path $cidr $prefix) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- /* ipgate sees an IPv4 client as IPv4, so an IPv4-mapped CIDR (::ffff:a.b.c.d/96 and longer) would never match. */ -}}
{{- if regexMatch "(?i)^(::(0{1,4}:){0,4}|(0{1,4}:){5})ffff:[^/]*/(9[6-9]|1[01][0-9]|12[0-8])$" $cidr -}}
{{- fail (printf "%s: %q is an IPv4-mapped IPv6 CIDR, which never matches (ipgate sees IPv4 clients as IPv4): write it as an IPv4 CIDR" $path $cidr) -}}
{{- end -}}
{{- end -}}

{{/*
True ("true") when a CIDR list, or the allowlist a string names, holds a range that covers every
address (/0): a trust list with one lets any peer name any client. Call with (list $ <list or name>).
*/}}
{{- define "ipgate.trustsAll" -}}
{{- $root := index . 0 -}}
{{- $v := index . 1 -}}
{{- $entries := list -}}
{{- if kindIs "string" $v -}}
{{- $list := get $root.Values.allowlists $v -}}
{{- if kindIs "map" $list -}}{{- $entries = $list.entries | default list -}}{{- else -}}{{- $entries = $list | default list -}}{{- end -}}
{{- else -}}
{{- $entries = $v | default list -}}
{{- end -}}
{{- $all := false -}}
{{- range $entries -}}
{{- $cidr := "" -}}
{{- if kindIs "string" . -}}{{- $cidr = . -}}{{- else if kindIs "map" . -}}{{- $cidr = toString .cidr -}}{{- end -}}
{{- if hasSuffix "/0" $cidr -}}{{- $all = true -}}{{- end -}}
{{- end -}}
{{- if $all -}}true{{- end -}}
{{- end -}}

{{/*
Checks values.schema.json cannot express (cross-field rules). Each failure names the field.
*/}}
{{- define "ipgate.validate" -}}
{{- /* The admin token: a Secret made once outside the chart, or generated by helm install on request. */ -}}
{{- if and (not .Values.admin.existingSecret) (not .Values.admin.generateToken) -}}
{{- $name := include "ipgate.suffixed" (list . "admin-token") -}}
{{- fail (printf "admin.existingSecret: name the Secret that holds the admin API token. The chart makes none by default, so that helm template, Argo CD and Flux render the same objects on every sync and nothing rotates the token. Create it once:\n  kubectl -n %s create secret generic %s --from-literal=token=\"$(openssl rand -hex 24)\"\nthen set admin.existingSecret: %s (or keep it in your secret manager: External Secrets, Sealed Secrets, SOPS; the key is admin.existingSecretKey, default token). To let helm install generate one instead (kept on upgrade by lookup; not for renderers without cluster access), set admin.generateToken: true" .Release.Namespace $name $name) -}}
{{- end -}}
{{- /* The data Service: needed unless hostNetwork carries the traffic. */ -}}
{{- if and (not .Values.service.enabled) (not .Values.hostNetwork) -}}
{{- fail "service.enabled: false without hostNetwork: nothing would carry client connections to the pods (their listener ports are on the pod network only); keep the Service, or set hostNetwork: true to take connections on the nodes' own addresses" -}}
{{- end -}}
{{- /* externalTrafficPolicy Cluster: kube-proxy source-NATs what it forwards between nodes. */ -}}
{{- if and .Values.service.enabled (eq .Values.service.externalTrafficPolicy "Cluster") (not .Values.service.acceptSourceNat) -}}
{{- range $i, $l := .Values.listeners -}}
{{- $mode := dig "proxyProtocol" "mode" "off" $l -}}
{{- if ne $mode "required" -}}
{{- fail (printf "service.externalTrafficPolicy: Cluster: kube-proxy forwards NodePort traffic to other nodes' pods and source-NATs it, so ipgate would see a node address instead of the client, and the allowlist would decide on it. listeners[%d] (%q) has proxyProtocol.mode %q, so no PROXY header names the client there. Keep Local; or put a load balancer that sends a PROXY header in front and set proxyProtocol.mode: required (with its trustedSources) on every listener; or, to accept node addresses, set service.acceptSourceNat: true" $i $l.name $mode) -}}
{{- end -}}
{{- end -}}
{{- end -}}
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
{{- $ppMode := dig "proxyProtocol" "mode" "off" $l -}}
{{- if and (ne $ppMode "off") (not (dig "proxyProtocol" "trustedSources" list $l)) -}}
{{- fail (printf "listeners[%d].proxyProtocol.trustedSources: is empty, so no peer may send a PROXY header in mode %q: list the load balancers' CIDRs" $i $ppMode) -}}
{{- end -}}
{{- /* trustedSources / trustedProxies: CIDRs, or the name of an allowlist (changes live). */ -}}
{{- range $field := list (list "proxyProtocol" "trustedSources") (list "http" "trustedProxies") -}}
{{- $v := dig (index $field 0) (index $field 1) list $l -}}
{{- if and (include "ipgate.trustsAll" (list $ $v)) (not $l.allowTrustAll) -}}
{{- $where := ternary (printf " (through allowlist %q)" (toString $v)) "" (kindIs "string" $v) -}}
{{- $what := ternary "send a PROXY header naming any client address" "send an X-Forwarded-For naming any client address" (eq (index $field 0) "proxyProtocol") -}}
{{- fail (printf "listeners[%d].%s.%s: a range covering every address (/0)%s trusts every peer: any client could %s and pass the allowlist as that address. List your balancers' or proxies' CIDRs instead; if nothing but them can reach this listener (a firewall, a NetworkPolicy), set listeners[%d].allowTrustAll: true" $i (index $field 0) (index $field 1) $where $what $i) -}}
{{- end -}}
{{- if kindIs "string" $v -}}
{{- if not (hasKey $.Values.allowlists $v) -}}
{{- fail (printf "listeners[%d].%s.%s: %q names no allowlist (defined: %s)" $i (index $field 0) (index $field 1) $v (keys $.Values.allowlists | sortAlpha | join ", ")) -}}
{{- end -}}
{{- else -}}
{{- range $j, $c := $v -}}
{{- include "ipgate.checkCidr" (list (printf "listeners[%d].%s.%s[%d]" $i (index $field 0) (index $field 1) $j) $c) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not (hasKey $.Values.allowlists $l.allowlist) -}}
{{- fail (printf "listeners[%d].allowlist: %q is not defined under allowlists (defined: %s)" $i $l.allowlist (keys $.Values.allowlists | sortAlpha | join ", ")) -}}
{{- end -}}
{{- end -}}
{{- range $name, $list := .Values.allowlists -}}
{{- $entries := $list -}}
{{- $at := printf "allowlists.%s" $name -}}
{{- if kindIs "map" $list -}}
{{- $entries = $list.entries | default list -}}
{{- $at = printf "allowlists.%s.entries" $name -}}
{{- end -}}
{{- range $j, $e := $entries -}}
{{- if kindIs "string" $e -}}
{{- include "ipgate.checkCidr" (list (printf "%s[%d]" $at $j) $e) -}}
{{- else -}}
{{- include "ipgate.checkCidr" (list (printf "%s[%d].cidr" $at $j) $e.cidr) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $j, $c := .Values.config.clusterNetworks -}}
{{- include "ipgate.checkCidr" (list (printf "config.clusterNetworks[%d]" $j) $c) -}}
{{- end -}}
{{- /* TLS: each Secret its own directory; a listener path under /etc/ipgate/tls/ must be in one. */ -}}
{{- $tlsDirs := dict -}}
{{- range $j, $s := .Values.tls.secrets -}}
{{- if hasKey $tlsDirs $s.name -}}
{{- fail (printf "tls.secrets[%d].name: %q is used twice; each Secret is mounted at its own /etc/ipgate/tls/<name>/" $j $s.name) -}}
{{- end -}}
{{- $_ := set $tlsDirs $s.name true -}}
{{- end -}}
{{- range $i, $l := .Values.listeners -}}
{{- if $l.tls -}}
{{- $paths := list -}}
{{- range $j, $c := $l.tls.certificates -}}
{{- $paths = append $paths (list (printf "listeners[%d].tls.certificates[%d].cert" $i $j) $c.cert) -}}
{{- $paths = append $paths (list (printf "listeners[%d].tls.certificates[%d].key" $i $j) $c.key) -}}
{{- end -}}
{{- if $l.tls.clientCA -}}
{{- $paths = append $paths (list (printf "listeners[%d].tls.clientCA" $i) $l.tls.clientCA) -}}
{{- end -}}
{{- range $p := $paths -}}
{{- $written := toString (index $p 1) -}}
{{- /* ipgate resolves a relative path against config.yaml's directory, /etc/ipgate. */ -}}
{{- $file := ternary $written (printf "/etc/ipgate/%s" (trimPrefix "./" $written)) (hasPrefix "/" $written) -}}
{{- if hasPrefix "/etc/ipgate/tls/" $file -}}
{{- $dir := first (splitList "/" (trimPrefix "/etc/ipgate/tls/" $file)) -}}
{{- if not (hasKey $tlsDirs $dir) -}}
{{- fail (printf "%s: %q is in /etc/ipgate/tls/%s/, but tls.secrets mounts no Secret named %q there (mounted: %s)" (index $p 0) $written $dir $dir (keys $tlsDirs | sortAlpha | join ", " | default "none")) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and .Values.hostNetwork (eq .Values.kind "Deployment") (gt (int .Values.replicaCount) 1) (not .Values.affinity) -}}
{{- fail "hostNetwork: two pods of a Deployment on one node would fight over the same host ports; use kind: DaemonSet, or set affinity (pod anti-affinity per node)" -}}
{{- end -}}
{{- $drainMs := int .Values.config.shutdown.drainTimeoutMs -}}
{{- if le (mul (int .Values.terminationGracePeriodSeconds) 1000) (add $drainMs (mul (int .Values.preStopSleepSeconds) 1000)) -}}
{{- fail (printf "terminationGracePeriodSeconds: %d s is not more than preStopSleepSeconds (%d s) + config.shutdown.drainTimeoutMs (%d ms): pods would be killed while draining" (int .Values.terminationGracePeriodSeconds) (int .Values.preStopSleepSeconds) $drainMs) -}}
{{- end -}}
{{- with .Values.updateStrategy -}}
{{- $type := default "RollingUpdate" .type -}}
{{- if and (eq $type "OnDelete") (eq $.Values.kind "Deployment") -}}
{{- fail "updateStrategy.type: OnDelete is a DaemonSet strategy; a Deployment has RollingUpdate or Recreate" -}}
{{- end -}}
{{- if and (eq $type "Recreate") (eq $.Values.kind "DaemonSet") -}}
{{- fail "updateStrategy.type: Recreate is a Deployment strategy; a DaemonSet has RollingUpdate or OnDelete" -}}
{{- end -}}
{{- if and (ne $type "RollingUpdate") .rollingUpdate -}}
{{- fail (printf "updateStrategy.rollingUpdate: only with type RollingUpdate (type is %s)" $type) -}}
{{- end -}}
{{- if eq $type "RollingUpdate" -}}
{{- $ru := default dict .rollingUpdate -}}
{{- /* Kubernetes' defaults for an omitted field: DaemonSet 0 / 1, Deployment 25% / 25%. */ -}}
{{- $ds := eq $.Values.kind "DaemonSet" -}}
{{- $surge := ternary (toString $ru.maxSurge) (ternary "0" "25%" $ds) (hasKey $ru "maxSurge") -}}
{{- $unavail := ternary (toString $ru.maxUnavailable) (ternary "1" "25%" $ds) (hasKey $ru "maxUnavailable") -}}
{{- if and (include "ipgate.usesNodePorts" $) (not (has $surge (list "0" "0%"))) -}}
{{- fail (printf "updateStrategy.rollingUpdate.maxSurge: %s with hostNetwork: the new pod cannot bind the node's ports while the old one runs, so the update would stall; use maxSurge: 0 and maxUnavailable: 1" $surge) -}}
{{- end -}}
{{- if and (has $surge (list "0" "0%")) (has $unavail (list "0" "0%")) -}}
{{- fail "updateStrategy.rollingUpdate: maxSurge and maxUnavailable are both 0, so no pod could ever be replaced" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The `source: config` lists of the values (names, sorted): rendered into their own ConfigMap
(allowlist-declared-configmap.yaml), one key <name>.yaml each, which ipgate reads and watches through
the API, so an edit of their entries reaches the pods without changing the pod template.
*/}}
{{- define "ipgate.declaredLists" -}}
{{- $names := list -}}
{{- range $name, $list := .Values.allowlists -}}
{{- if and (kindIs "map" $list) (eq (toString $list.source) "config") -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- $names | sortAlpha | join "," -}}
{{- end -}}
