# A private network and its subnets.

resource "sandbox_network" "this" {
  name   = var.name
  cidr   = var.cidr
  region = var.region
  labels = {
    managed_by = "gantry"
    template   = "network"
  }
}

resource "sandbox_subnet" "this" {
  count      = var.subnet_count
  network_id = sandbox_network.this.id
  name       = "${var.name}-${count.index}"
  cidr       = cidrsubnet(var.cidr, 8, count.index)
}
