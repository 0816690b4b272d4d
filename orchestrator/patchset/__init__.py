"""The patch series: its model (series, patches, hunks), the layouts it is rendered into, the
patch files on disk, and refreshing it from a resolved worktree."""
