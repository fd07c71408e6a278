# A private S3 bucket on the environment's AWS target. Credentials come only from the
# phase's environment (the AWS SDK's chain exchanges the phase's workload token).

locals {
  bucket = "gantry-${var.gantry_workspace_id}-${var.name}"
}

resource "s3_bucket" "this" {
  bucket     = local.bucket
  versioning = var.versioning
  tags = {
    managed_by = "gantry"
    template   = "bucket-s3"
    workspace  = var.gantry_workspace_id
  }
}
