"""The run's record written: results.json (its model is in model/results.py), summary.md,
junit.xml, and merging per-cell results into one."""
