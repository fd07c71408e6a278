# A PostgreSQL database on its own private network.

resource "sandbox_network" "this" {
  name   = "${var.name}-net"
  cidr   = var.network_cidr
  region = "eu-west"
  labels = {
    managed_by = "gantry"
    template   = "postgres"
  }
}

resource "sandbox_subnet" "this" {
  network_id = sandbox_network.this.id
  name       = "${var.name}-db"
  cidr       = cidrsubnet(var.network_cidr, 8, 1)
}

resource "sandbox_database" "this" {
  name                  = var.name
  engine                = "postgres"
  engine_version        = var.engine_version
  size                  = var.size
  storage_gb            = var.storage_gb
  backup_retention_days = var.backup_retention_days
  encrypted             = true
  network_id            = sandbox_network.this.id
  subnet_id             = sandbox_subnet.this.id
  labels = {
    managed_by = "gantry"
    template   = "postgres"
  }
}
