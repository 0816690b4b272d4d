"""The project's own CI: the GitHub Actions workflow generated from matrix.yaml."""
