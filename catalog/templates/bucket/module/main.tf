# A private object storage bucket.

resource "sandbox_bucket" "this" {
  name           = var.name
  region         = var.region
  versioning     = var.versioning
  retention_days = var.retention_days
  public         = false
  labels = {
    managed_by = "gantry"
    template   = "bucket"
  }
}
