"""Evidence that the fix matters: failure classification, attribution, mutants, training curves."""
