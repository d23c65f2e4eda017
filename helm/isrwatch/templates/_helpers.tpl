{{/* Names ------------------------------------------------------------------------------ */}}

{{- define "isrwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "isrwatch.fullname" -}}
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

{{- define "isrwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "isrwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "isrwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "isrwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "isrwatch.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "isrwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: isrwatch
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The pods that run the job: the single pod (component job) or the driver. */}}
{{- define "isrwatch.jobComponent" -}}
{{- if eq .Values.mode "sparkOperator" -}}driver{{- else -}}job{{- end -}}
{{- end -}}

{{- define "isrwatch.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* Paths inside the pods --------------------------------------------------------------- */}}

{{- define "isrwatch.configDir" -}}/etc/isrwatch/config{{- end -}}
{{- define "isrwatch.sparkConfDir" -}}/etc/isrwatch/spark{{- end -}}
{{- define "isrwatch.tlsDir" -}}/etc/isrwatch/kafka-tls{{- end -}}
{{- define "isrwatch.checkpointMount" -}}/var/lib/isrwatch{{- end -}}

{{- define "isrwatch.checkpointLocation" -}}
{{- if eq .Values.checkpoint.type "objectStore" -}}
{{- .Values.checkpoint.objectStore.uri -}}
{{- else -}}
{{- printf "%s/%s" (include "isrwatch.checkpointMount" .) (.Values.checkpoint.pvc.subPath | trimAll "/") -}}
{{- end -}}
{{- end -}}

{{- define "isrwatch.checkpointClaim" -}}
{{- default (printf "%s-checkpoint" (include "isrwatch.fullname" .)) .Values.checkpoint.pvc.existingClaim -}}
{{- end -}}

{{/* The job's configuration --------------------------------------------------------------

The shipped defaults (files/isrwatch.yaml, synced from conf/isrwatch.yaml), overridden by
.Values.config, overridden by the settings the chart owns. */}}

{{- define "isrwatch.managedConfig" -}}
{{- $kafka := dict -}}
{{- if .Values.kafka.tls.existingSecret -}}
{{- $tls := .Values.kafka.tls -}}
{{- $dir := include "isrwatch.tlsDir" . -}}
{{- range $setting, $key := dict "ssl_cafile" $tls.caKey "ssl_certfile" $tls.certKey "ssl_keyfile" $tls.keyKey -}}
{{- if $key -}}
{{- $_ := set $kafka $setting (printf "%s/%s" $dir $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $master := printf "local[%d]" (int .Values.deployment.cores) -}}
{{- if eq .Values.mode "sparkOperator" -}}
{{- $master = .Values.sparkOperator.kubernetesMaster -}}
{{- end -}}
{{- $streaming := dict "checkpoint_location" (include "isrwatch.checkpointLocation" .) "spark_master" $master -}}
{{- $metrics := dict "enabled" true "host" "0.0.0.0" "port" (int .Values.metrics.port) -}}
{{- toYaml (dict "kafka" $kafka "streaming" $streaming "metrics" $metrics) -}}
{{- end -}}

{{- define "isrwatch.config" -}}
{{- $defaults := .Files.Get "files/isrwatch.yaml" | fromYaml -}}
{{- $managed := include "isrwatch.managedConfig" . | fromYaml -}}
{{- $config := mustMergeOverwrite (deepCopy $defaults) (deepCopy (default dict .Values.config)) $managed -}}
{{- toYaml $config -}}
{{- end -}}

{{/* The effective config.kafka.security_protocol (values over the shipped default). */}}
{{- define "isrwatch.securityProtocol" -}}
{{- $config := include "isrwatch.config" . | fromYaml -}}
{{- $config.kafka.security_protocol -}}
{{- end -}}

{{/* "true" when the exporter can read the Kafka source's status file: the python source
writes it next to the checkpoint, which the exporter sees on a pvc. */}}
{{- define "isrwatch.sourceStatusVisible" -}}
{{- $config := include "isrwatch.config" . | fromYaml -}}
{{- if and (eq (toString $config.kafka.source_format) "python") (eq .Values.checkpoint.type "pvc") -}}
true
{{- end -}}
{{- end -}}

{{/* Pod parts shared by both modes --------------------------------------------------------- */}}

{{/* Environment of every Spark pod: the config file and the Kafka secrets. */}}
{{- define "isrwatch.env" -}}
- name: ISRWATCH_CONFIG
  value: {{ printf "%s/isrwatch.yaml" (include "isrwatch.configDir" .) }}
{{- with .Values.kafka.sasl.existingSecret }}
- name: ISRWATCH_KAFKA__SASL_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ . }}
      key: {{ $.Values.kafka.sasl.passwordKey }}
{{- with $.Values.kafka.sasl.usernameKey }}
- name: ISRWATCH_KAFKA__SASL_USERNAME
  valueFrom:
    secretKeyRef:
      name: {{ $.Values.kafka.sasl.existingSecret }}
      key: {{ . }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "isrwatch.envFrom" -}}
{{- if and (eq .Values.checkpoint.type "objectStore") .Values.checkpoint.objectStore.credentialsSecret }}
- secretRef:
    name: {{ .Values.checkpoint.objectStore.credentialsSecret }}
{{- end }}
{{- end -}}

{{/* Volumes of every Spark pod (the checkpoint's only with a pvc). */}}
{{- define "isrwatch.volumes" -}}
- name: config
  configMap:
    name: {{ include "isrwatch.fullname" . }}
    items:
      - key: isrwatch.yaml
        path: isrwatch.yaml
- name: tmp
  emptyDir:
    {{- with .Values.tmpVolume.medium }}
    medium: {{ . }}
    {{- end }}
    sizeLimit: {{ .Values.tmpVolume.sizeLimit }}
{{- if eq .Values.checkpoint.type "pvc" }}
- name: checkpoint
  persistentVolumeClaim:
    claimName: {{ include "isrwatch.checkpointClaim" . }}
{{- end }}
{{- with .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ . }}
    defaultMode: 0440
    items:
      {{- range $key := list $.Values.kafka.tls.caKey $.Values.kafka.tls.certKey $.Values.kafka.tls.keyKey }}
      {{- if $key }}
      - key: {{ $key }}
        path: {{ $key }}
      {{- end }}
      {{- end }}
{{- end }}
{{- end -}}

{{- define "isrwatch.volumeMounts" -}}
- name: config
  mountPath: {{ include "isrwatch.configDir" . }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if eq .Values.checkpoint.type "pvc" }}
- name: checkpoint
  mountPath: {{ include "isrwatch.checkpointMount" . }}
{{- end }}
{{- if .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: {{ include "isrwatch.tlsDir" . }}
  readOnly: true
{{- end }}
{{- end -}}

{{/* The exec probes of the pod running the exporter. */}}
{{- define "isrwatch.probeCommand" -}}
{{- $root := index . 0 -}}
{{- $check := index . 1 -}}
{{- $probe := index . 2 -}}
{{- $maxAge := index . 3 -}}
{{- $requireSource := index . 4 -}}
exec:
  command:
    - python
    - -m
    - streaming.tools.probe
    - --check
    - {{ $check }}
    - --url
    - {{ printf "http://127.0.0.1:%d/metrics" (int $root.Values.metrics.port) }}
    - --max-batch-age
    - {{ $maxAge | quote }}
    - --timeout
    - {{ max 1 (sub (int $probe.timeoutSeconds) 1) | quote }}
    - {{ if $requireSource }}--require-source{{ else }}--no-require-source{{ end }}
periodSeconds: {{ $probe.periodSeconds }}
timeoutSeconds: {{ $probe.timeoutSeconds }}
failureThreshold: {{ $probe.failureThreshold }}
{{- end -}}

{{- define "isrwatch.probes" -}}
{{- $p := .Values.probes -}}
{{- $requireSource := and $p.readiness.requireSourceUp (include "isrwatch.sourceStatusVisible" .) -}}
startupProbe:
  {{- include "isrwatch.probeCommand" (list . "live" $p.startup $p.liveness.maxBatchAgeSeconds false) | nindent 2 }}
livenessProbe:
  {{- include "isrwatch.probeCommand" (list . "live" $p.liveness $p.liveness.maxBatchAgeSeconds false) | nindent 2 }}
readinessProbe:
  {{- include "isrwatch.probeCommand" (list . "ready" $p.readiness $p.readiness.maxBatchAgeSeconds $requireSource) | nindent 2 }}
{{- end -}}

{{/* Cross-field rules that values.schema.json cannot say clearly. */}}
{{- define "isrwatch.validate" -}}
{{- $protocol := include "isrwatch.securityProtocol" . -}}
{{- $sasl := has $protocol (list "SASL_PLAINTEXT" "SASL_SSL") -}}
{{- $tls := has $protocol (list "SSL" "SASL_SSL") -}}
{{- if and $sasl (not .Values.kafka.sasl.existingSecret) -}}
{{- fail (printf "kafka.sasl.existingSecret is required: config.kafka.security_protocol is %s. Create a Secret with the SASL password (key %q) and name it there; the password never goes in values." $protocol .Values.kafka.sasl.passwordKey) -}}
{{- end -}}
{{- if and .Values.kafka.sasl.existingSecret (not $sasl) -}}
{{- fail (printf "kafka.sasl.existingSecret is set but config.kafka.security_protocol is %s: set it to SASL_PLAINTEXT or SASL_SSL, or unset the Secret." $protocol) -}}
{{- end -}}
{{- if and .Values.kafka.tls.existingSecret (not $tls) -}}
{{- fail (printf "kafka.tls.existingSecret is set but config.kafka.security_protocol is %s: set it to SSL or SASL_SSL, or unset the Secret." $protocol) -}}
{{- end -}}
{{- if and $sasl (not .Values.kafka.sasl.usernameKey) (not (dig "kafka" "sasl_username" "" (default dict .Values.config))) -}}
{{- fail "config.kafka.sasl_username is required with a SASL protocol (or kafka.sasl.usernameKey, to read it from the Secret)." -}}
{{- end -}}
{{- if and $sasl (not (dig "kafka" "sasl_mechanism" "" (default dict .Values.config))) -}}
{{- fail "config.kafka.sasl_mechanism is required with a SASL protocol: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512." -}}
{{- end -}}
{{- if and (eq .Values.checkpoint.type "objectStore") (not .Values.checkpoint.objectStore.uri) -}}
{{- fail "checkpoint.objectStore.uri is required with checkpoint.type objectStore, e.g. s3a://my-bucket/isrwatch/checkpoint." -}}
{{- end -}}
{{- if and (eq .Values.mode "sparkOperator") (eq .Values.checkpoint.type "pvc") (not .Values.checkpoint.pvc.existingClaim) (not (has "ReadWriteMany" .Values.checkpoint.pvc.accessModes)) -}}
{{- fail "mode sparkOperator with a pvc checkpoint needs checkpoint.pvc.accessModes [ReadWriteMany]: the driver and every executor write the checkpoint. Use a ReadWriteMany storage class, or checkpoint.type objectStore." -}}
{{- end -}}
{{- end -}}

{{/* Settings a checkpoint is bound to: the state is sharded by state_shards, the source's
offsets are per input topic and source format. Changing one while reusing the checkpoint
would lose or mix up state, so an upgrade that does so fails. Arguments: the previous
release's configuration (empty on install) and the new one. */}}
{{- define "isrwatch.checkpointGuard" -}}
{{- $previous := index . 0 -}}
{{- $current := index . 1 -}}
{{- if $previous -}}
{{- $location := toString (dig "streaming" "checkpoint_location" "" $current) -}}
{{- if eq $location (toString (dig "streaming" "checkpoint_location" "" $previous)) -}}
{{- range $key := list "streaming.state_shards" "topics.controller_events" "topics.fetch_responses" "kafka.source_format" -}}
{{- $path := splitList "." $key -}}
{{- $old := toString (dig (index $path 0) (index $path 1) "" $previous) -}}
{{- $new := toString (dig (index $path 0) (index $path 1) "" $current) -}}
{{- if ne $old $new -}}
{{- fail (printf "%s would change from %s to %s, but the checkpoint %s was written with %s: its state and offsets would no longer match. Keep %s, or give the job a new checkpoint (checkpoint.pvc.subPath or checkpoint.objectStore.uri) to start afresh from the topics." $key $old $new $location $old $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
