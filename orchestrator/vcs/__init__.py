"""The one git layer: an isolated runner (one error type),
the snapshot repository with its worktrees."""
