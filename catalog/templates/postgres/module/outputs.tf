output "database_id" {
  value = sandbox_database.this.id
}

output "endpoint" {
  value = sandbox_database.this.endpoint
}

output "network_id" {
  value = sandbox_network.this.id
}
