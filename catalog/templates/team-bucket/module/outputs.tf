output "bucket_id" {
  value = sandbox_bucket.this.id
}

output "url" {
  value = sandbox_bucket.this.url
}

output "labels" {
  value = sandbox_bucket.this.labels
}
