"""Drift: where the series stands on each target (builds nothing). check.py gathers the facts
with git; status.py turns them into statuses (pure); refresh.py regenerates the series from a
target's worktree."""
