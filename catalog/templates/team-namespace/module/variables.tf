variable "name" {
  type = string
}

variable "group" {
  type = string
}

variable "cpu" {
  type = number
}

variable "memory_gib" {
  type = number
}

variable "pods" {
  type = number
}

# Set by Gantry from the run (never an input): the namespace says which workspace and
# environment own it, and the cluster's admission policy holds a workspace to its own.
variable "gantry_workspace_id" {
  type = string
}

variable "gantry_environment_id" {
  type = string
}
