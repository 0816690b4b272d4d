"""The one git layer: a runner on GitPython (isolated environment, one error type) and the
snapshot repository with its worktrees."""
