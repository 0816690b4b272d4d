"""Running the matrix (matrix.py), one cell's pipeline (cell.py), builds, test runs, the result
cache, the toolchain."""
