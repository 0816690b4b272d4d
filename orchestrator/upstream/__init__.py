"""Talking to upstream: the GitHub REST API (github_api) shared by `pr` and `drift-issue`."""
