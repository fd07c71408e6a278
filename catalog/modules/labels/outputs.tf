output "name" {
  description = "The resource's name: <team>-<name>."
  value       = local.name
}

output "labels" {
  description = "The standard labels: team, cost_center, environment, workspace and managed_by."
  value       = local.labels
}
