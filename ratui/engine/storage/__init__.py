"""Object storage: landing zones outside the local disk."""
