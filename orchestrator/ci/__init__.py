"""GitHub Actions: the generated workflows (matrix, drift, the project's own CI), the action pins
they use, annotations, and the drift issue."""
