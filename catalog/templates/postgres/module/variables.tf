variable "name" {
  type = string
}

variable "engine_version" {
  type = string
}

variable "size" {
  type = string
}

variable "storage_gb" {
  type = number
}

variable "backup_retention_days" {
  type = number
}

variable "network_cidr" {
  type = string
}
