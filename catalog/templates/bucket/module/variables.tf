variable "name" {
  type = string
}

variable "versioning" {
  type = bool
}

variable "retention_days" {
  type = number
}

variable "region" {
  type = string
}
