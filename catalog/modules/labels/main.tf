# The platform team's standard name and labels for what a team provisions on the
# sandbox cloud, shared by every template that creates something a team owns. Pure
# HCL: it requires no provider, a template passes its outputs on.

locals {
  # <team>-<name>: a bucket, a database or a network says whose it is by its name.
  name = "${var.team}-${var.name}"

  labels = {
    team        = var.team
    cost_center = var.cost_center
    environment = var.environment
    workspace   = var.workspace
    managed_by  = "gantry"
  }
}
