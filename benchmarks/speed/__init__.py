"""The speed benchmark's parts (benchmarks/bench.py runs them): routes, measures, report."""
