"""Running the matrix: scheduling cells (matrix.py), one cell as a pipeline of named steps
(cell.py), CMake builds, test runs, the result cache and the toolchain probe."""
