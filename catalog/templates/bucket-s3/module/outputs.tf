output "bucket" {
  value = s3_bucket.this.bucket
}

output "arn" {
  value = s3_bucket.this.arn
}
