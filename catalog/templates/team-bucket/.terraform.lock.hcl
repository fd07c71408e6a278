# This file is maintained automatically by "tofu init".
# Manual edits may be lost in future updates.

provider "portal.local/sandbox/sandbox" {
  version     = "0.1.0"
  constraints = "0.1.0"
  hashes = [
    "h1:8RdYeEc7wGXPNaWIARdNlNgqOmmdkpNEUFrGZdUZDR8=",
  ]
}
