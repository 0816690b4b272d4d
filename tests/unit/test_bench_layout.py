"""Issue 45: the bench stays readable as it grows: no file of benchmarks/ over 900 lines, no
function over 80 (the project's limit on functions)."""

import ast

import pytest

from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit

FILES = sorted((ROOT / "benchmarks").rglob("*.py"))


def test_the_bench_is_split_into_modules():
    names = {p.relative_to(ROOT / "benchmarks").as_posix() for p in FILES}
    assert {"bench.py", "speed/routes.py", "speed/measures.py", "speed/report.py"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_bench_file_over_900_lines_and_no_function_over_80(path):
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") < 900, f"{path}: {text.count(chr(10))} lines"
    long = [
        f"{f.name}: {f.end_lineno - f.lineno + 1} lines"
        for f in ast.walk(ast.parse(text))
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        and f.end_lineno - f.lineno + 1 > 80
    ]
    assert long == [], f"{path}: {long}"
