"""The run's record: the typed results model (results.json), summary.md, junit.xml, and merging
per-cell results into one."""
