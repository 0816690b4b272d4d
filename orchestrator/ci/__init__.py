"""GitHub Actions: the generated workflows, the action pins they use, the drift issue."""
