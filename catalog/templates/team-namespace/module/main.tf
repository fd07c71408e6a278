# A namespace for one team: a quota on what it may use, default requests and limits for
# containers that set none (the quota needs them), and the edit role for the team's group.

locals {
  labels = {
    "app.kubernetes.io/managed-by" = "gantry"
    "gantry.dev/template"          = "team-namespace"
  }
}

resource "kubernetes_namespace" "this" {
  metadata {
    name = var.name
    labels = merge(local.labels, {
      "gantry.dev/workspace"   = var.gantry_workspace_id
      "gantry.dev/environment" = var.gantry_environment_id
    })
  }
}

resource "kubernetes_resource_quota" "this" {
  metadata {
    name      = "team-quota"
    namespace = kubernetes_namespace.this.metadata[0].name
    labels    = local.labels
  }
  spec {
    hard = {
      "requests.cpu"    = tostring(var.cpu)
      "limits.cpu"      = tostring(var.cpu)
      "requests.memory" = "${var.memory_gib}Gi"
      "limits.memory"   = "${var.memory_gib}Gi"
      pods              = tostring(var.pods)
    }
  }
}

resource "kubernetes_limit_range" "this" {
  metadata {
    name      = "team-defaults"
    namespace = kubernetes_namespace.this.metadata[0].name
    labels    = local.labels
  }
  spec {
    limit {
      type            = "Container"
      default_request = { cpu = "100m", memory = "128Mi" }
      default         = { cpu = "500m", memory = "512Mi" }
    }
  }
}

resource "kubernetes_role_binding" "team" {
  metadata {
    name      = "team-edit"
    namespace = kubernetes_namespace.this.metadata[0].name
    labels    = local.labels
  }
  role_ref {
    api_group = "rbac.authorization.k8s.io"
    kind      = "ClusterRole"
    name      = "edit"
  }
  subject {
    api_group = "rbac.authorization.k8s.io"
    kind      = "Group"
    name      = var.group
  }
}
