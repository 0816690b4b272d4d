"""What goes upstream: the bundle, the target's own contribution policy, the readiness checks,
the pull request's text, and the GitHub calls (github_api: the REST helper shared with
drift-issue)."""
