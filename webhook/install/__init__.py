"""What an operator installs: the manifests and the webhook's certificates."""
