variable "name" {
  type = string
}

variable "cidr" {
  type = string
}

variable "subnet_count" {
  type = number
}

variable "region" {
  type = string
}
