# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "registry.opentofu.org/hashicorp/kubernetes" {
  version     = "1.13.4"
  constraints = "1.13.4"
  hashes = [
    "h1:d66pwuKKZGztGLPinovn/HKE24IwIENlQ6uw+sXr2XM=",
  ]
}
