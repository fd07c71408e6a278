variable "team" {
  type = string
}

variable "name" {
  type = string
}

variable "cost_center" {
  type = string
}

variable "retention_days" {
  type = number
}

# Set by Gantry from the run, never by a person (docs/catalog.md, context variables).
variable "gantry_environment_id" {
  type = string
}

variable "gantry_workspace_id" {
  type = string
}
