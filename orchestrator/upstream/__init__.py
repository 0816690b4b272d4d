"""What goes upstream: the verified pull-request bundle and the GitHub pull request, through the
GitHub REST API (github_api, shared with drift-issue)."""
