output "network_id" {
  value = sandbox_network.this.id
}

output "subnet_ids" {
  value = sandbox_subnet.this[*].id
}
