terraform {
  required_providers {
    s3 = {
      source  = "portal.local/gantry/s3"
      version = "0.1.0"
    }
  }
}
