{{/* The release's full name, the prefix of every object (63 characters at most). */}}
{{- define "gantry.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels that select the portal's pods: the Deployment, the Service and the PDB share them. */}}
{{- define "gantry.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: portal
{{- end -}}

{{/* Labels on every object. */}}
{{- define "gantry.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gantry.serviceAccountName" -}}
{{- default (include "gantry.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The Secret the portal reads: the one named, or the one this chart makes. */}}
{{- define "gantry.secretName" -}}
{{- default (include "gantry.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{/* The namespace of the runner Jobs. */}}
{{- define "gantry.runnerNamespace" -}}
{{- default .Release.Namespace .Values.kubernetesExecutor.namespace -}}
{{- end -}}

{{- define "gantry.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The environment both the portal and its migration init container read from the Secret. */}}
{{- define "gantry.databaseEnv" -}}
- name: GANTRY_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "gantry.secretName" . }}
      key: database-url
{{- end -}}

{{/* The container security context of every container: the restricted Pod Security Standard and a read-only root. */}}
{{- define "gantry.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.runAsUser }}
runAsGroup: {{ .Values.runAsUser }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}
