terraform {
  required_providers {
    sandbox = {
      source  = "portal.local/sandbox/sandbox"
      version = "0.1.0"
    }
  }
}
