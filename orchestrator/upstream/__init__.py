"""The upstream side: bundles, pull requests, and the checks on what comes back from disk."""
