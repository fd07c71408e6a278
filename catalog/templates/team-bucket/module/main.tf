# A private object storage bucket for one team. Its name and labels come from the
# platform team's labels module, which Gantry fetches, checks against the sha256 in
# allowlist.yaml and bundles as a local module: the runner fetches nothing.

module "labels" {
  source  = "registry.acme.example/platform/labels/sandbox"
  version = "1.0.0"

  team        = var.team
  name        = var.name
  cost_center = var.cost_center
  environment = var.gantry_environment_id
  workspace   = var.gantry_workspace_id
}

resource "sandbox_bucket" "this" {
  name           = module.labels.name
  versioning     = true
  retention_days = var.retention_days
  public         = false
  # The platform's labels, and which template made the bucket (the required_labels
  # policy asks for managed_by and template).
  labels = merge(module.labels.labels, { template = "team-bucket" })
}
