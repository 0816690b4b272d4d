"""Results: what a run records, and the checks on results files read back."""
