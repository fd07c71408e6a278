variable "team" {
  type        = string
  description = "The owning team: 2 to 20 lower-case letters, digits and hyphens, starting with a letter."

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,19}$", var.team))
    error_message = "team must be 2 to 20 lower-case letters, digits and hyphens, starting with a letter."
  }
}

variable "name" {
  type        = string
  description = "What the resource is, within the team: 1 to 40 lower-case letters, digits and hyphens."

  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$", var.name))
    error_message = "name must be 1 to 40 lower-case letters, digits and hyphens, neither starting nor ending with a hyphen."
  }
}

variable "cost_center" {
  type        = string
  description = "The cost center the resource is billed to, such as cc-1042."

  validation {
    condition     = can(regex("^cc-[0-9]{3,6}$", var.cost_center))
    error_message = "cost_center must look like cc-1042."
  }
}

variable "environment" {
  type        = string
  description = "The environment the resource belongs to (Gantry's environment id)."
}

variable "workspace" {
  type        = string
  description = "The workspace that owns the resource (Gantry's workspace id)."
}
