"""What goes upstream: the verified pull-request bundle and the GitHub pull request."""
