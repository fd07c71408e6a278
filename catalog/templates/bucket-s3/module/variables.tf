variable "name" {
  type = string
}

variable "versioning" {
  type = bool
}

# Set by Gantry, never by a person: the id of the workspace the bucket belongs to. The
# bucket's name starts with gantry-<workspace id>-, which a role policy can require
# (docs/targets.md), so one workspace never reaches another's buckets.
variable "gantry_workspace_id" {
  type     = string
  nullable = false

  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,22}$", var.gantry_workspace_id))
    error_message = "gantry_workspace_id is the workspace's id, which Gantry sets: at most 23 lower-case letters, digits and hyphens (the bucket name then fits in 63 characters)."
  }
}
