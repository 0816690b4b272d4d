"""infer_tests: the test lines a change's diff implies (topic.yaml's `tests:`), and the refusal
naming the line to write when they cannot be told. The diffs are written here, in the shape git
writes (hunk headers with the enclosing function as git's default funcname finds it)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError
from orchestrator.patchset.infer_tests import (
    NoTestsInferred,
    infer_tests,
    parse_test_line,
)

EVAL = "static std::vector<std::unique_ptr<test_case>> make_test_cases_eval() {"
PERF = "static std::vector<std::unique_ptr<test_case>> make_test_cases_perf() {"
OPS = "tests/test-backend-ops.cpp"
FIX = (
    "diff --git a/src/ggml-cpu/ops.cpp b/src/ggml-cpu/ops.cpp\n"
    "--- a/src/ggml-cpu/ops.cpp\n+++ b/src/ggml-cpu/ops.cpp\n"
    "@@ -10,3 +10,3 @@ static void f(\n     int a;\n-    int b = 1;\n+    int b = 2;\n     int c;\n"
)


def hunk(path: str, section: str, added: list[str], context: tuple[str, str] = ("", "")) -> str:
    """One file's diff: `added` between two context lines, under `section`."""
    before, after = context or ("", "")
    body = [f" {before}", *(f"+{a}" for a in added), f" {after}"]
    n = len(added)
    return (
        f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
        f"@@ -100,2 +100,{n + 2} @@ {section}\n" + "\n".join(body) + "\n"
    )


def cases(*lines: str, section: str = EVAL) -> str:
    return hunk(OPS, section, list(lines))


@pytest.mark.parametrize(
    "added, line",
    [
        (["    test_cases.emplace_back(new test_concat(type, {4, 5, 6, 7}, 3, 0, 0));"], "CONCAT"),
        (
            ["    test_cases.emplace_back(new test_soft_max(GGML_TYPE_F32, {16, 2, 3, 1}));"],
            "SOFT_MAX",
        ),
        (
            ["    test_cases.emplace_back(new test_unary(GGML_UNARY_OP_GELU, GGML_TYPE_F32));"],
            "GELU",
        ),
        (
            [
                "    for (auto op : {ggml_mul, ggml_div_inplace}) {",
                "        test_cases.emplace_back(new test_bin_bcast(op, GGML_TYPE_F32, ne, nr));",
                "    }",
            ],
            "MUL,DIV",
        ),
        (
            ["    test_cases.emplace_back(new test_glu(GGML_GLU_OP_SWIGLU, GGML_TYPE_F32));"],
            "SWIGLU",
        ),
        (["    test_cases.emplace_back(new test_interpolate(GGML_TYPE_F32, ne));"], "UPSCALE"),
        (
            ["    test_cases.emplace_back(new test_pool2d(GGML_OP_POOL_AVG, GGML_TYPE_F32));"],
            "POOL_2D",
        ),
        (
            [
                "    test_cases.emplace_back(new test_mul_mat(GGML_TYPE_Q4_0, GGML_TYPE_F32));",
                "    test_cases.emplace_back(new test_concat(type, {4, 5, 6, 7}, 3, 0, 0));",
            ],
            "MUL_MAT,CONCAT",
        ),
    ],
)
def test_the_ops_whose_cases_the_diff_adds(added, line):
    inferred = infer_tests("x.diff", FIX + cases(*added))
    assert inferred.lines == (f"test-backend-ops -o {line}",)
    assert f"`test-backend-ops -o {line}`" in inferred.explanation
    assert "tests/test-backend-ops.cpp" in inferred.explanation


def test_other_test_programs_by_their_file_and_in_the_diffs_order():
    diff = (
        FIX
        + hunk("tests/test-opt.cpp", "static void test_x() {", ["    int y = 0;"])
        + cases("    test_cases.emplace_back(new test_argsort(GGML_TYPE_F32, ne));")
        + hunk("tests/test-quantize-fns.cpp", "int main() {", ["    // more"])
        + hunk("tests/CMakeLists.txt", "", ["# registration only"])
    )
    assert infer_tests("x.diff", diff).lines == (
        "test-opt",
        "test-backend-ops -o ARGSORT",
        "test-quantize-fns",
    )


def test_a_change_inside_a_case_struct_names_its_op():
    diff = hunk(OPS, "struct test_concat : public test_case {", ["        const bool v;"])
    assert infer_tests("x.diff", diff).lines == ("test-backend-ops -o CONCAT",)


def test_a_struct_after_the_one_the_header_names_is_not_that_one():
    """git names the struct the hunk starts in; lines added after its `};` are not its code."""
    added = [
        "struct test_newop : public test_case {",
        "    std::string op_desc(ggml_tensor * t) override {",
        '        return "NEW_OP";',
        "    }",
        "};",
    ]
    body = (
        f"diff --git a/{OPS} b/{OPS}\n--- a/{OPS}\n+++ b/{OPS}\n"
        "@@ -100,2 +100,7 @@ struct test_diag : public test_case {\n"
        " };\n" + "".join(f"+{a}\n" for a in added) + " \n"
    )
    construct = cases("    test_cases.emplace_back(new test_newop(GGML_TYPE_F32));")
    diff = body + construct[construct.index("@@") :]  # one file, two hunks
    assert infer_tests("x.diff", diff).lines == ("test-backend-ops -o NEW_OP",)


def test_a_changed_value_list_takes_the_case_its_context_constructs():
    diff = (
        f"diff --git a/{OPS} b/{OPS}\n--- a/{OPS}\n+++ b/{OPS}\n"
        f"@@ -100,3 +100,3 @@ {EVAL}\n"
        "-    for (int dim : {0, 1}) {\n"
        "+    for (int dim : {0, 1, 2, 3}) {\n"
        "         test_cases.emplace_back(new test_concat(type, ne, 7, dim, 0));\n"
        "     }\n"
    )
    assert infer_tests("x.diff", diff).lines == ("test-backend-ops -o CONCAT",)


@pytest.mark.parametrize(
    "diff, why",
    [
        (
            cases(
                "    for (int op = 0; op < GGML_UNARY_OP_COUNT; op++) {",
                "        test_cases.emplace_back(new test_unary((ggml_unary_op) op, type));",
                "    }",
            ),
            "do not name their op",
        ),
        (
            cases("    test_cases.emplace_back(new test_concat(type, ne, 7, 0, 0));", section=PERF),
            "adds only perf cases",
        ),
        (cases("    // a comment only"), "no case struct is named"),
        (hunk(OPS, "static void usage(char ** argv) {", ['    printf("x");']), "adds no test case"),
    ],
)
def test_test_backend_ops_cases_without_an_op_are_refused_with_the_line(diff, why):
    with pytest.raises(NoTestsInferred) as e:
        infer_tests("x.diff", FIX + diff)
    assert why in str(e.value)
    assert e.value.line == "test-backend-ops -o OP"
    assert "--test 'test-backend-ops -o OP'" in str(e.value)
    assert isinstance(e.value, ConfigError)  # one line, exit 2


def test_a_change_with_no_test_program_is_refused_naming_what_it_touches():
    diff = FIX + hunk("tests/CMakeLists.txt", "", ["# registration only"])
    with pytest.raises(NoTestsInferred) as e:
        infer_tests("x.diff", diff)
    assert "tests/CMakeLists.txt" in str(e.value)
    assert e.value.line == "test-NAME"


def test_a_deleted_test_file_runs_nothing():
    path = "tests/test-old.c"
    gone = f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
    gone += "@@ -1,1 +0,0 @@\n-int main() { return 0; }\n"
    with pytest.raises(NoTestsInferred):
        infer_tests("x.diff", FIX + gone)


def test_the_llama_cpp_layout_is_read_the_same():
    diff = FIX.replace("src/", "ggml/src/") + cases(
        "    test_cases.emplace_back(new test_concat(type, ne, 7, 0, 0));"
    )
    assert infer_tests("x.diff", diff).lines == ("test-backend-ops -o CONCAT",)


@pytest.mark.parametrize(
    "line, parsed",
    [
        ("test-opt", ("test-opt", ())),
        ("test-backend-ops -o SOFT_MAX", ("test-backend-ops", ("-o", "SOFT_MAX"))),
        ("test-backend-ops -o 'ADD(type=f16)'", ("test-backend-ops", ("-o", "ADD(type=f16)"))),
    ],
)
def test_a_test_line_is_a_program_and_its_shell_words(line, parsed):
    assert parse_test_line("topic.yaml", line) == parsed


@pytest.mark.parametrize(
    "line, why",
    [
        ("", "expected a test program"),
        ("opt", "is not a test program"),
        ("Test-opt", "is not a test program"),
        ("../test-opt", "is not a test program"),
        ("test-opt 'x", "quotation"),
    ],
)
def test_a_bad_test_line_is_one_line_naming_it(line, why):
    with pytest.raises(ConfigError) as e:
        parse_test_line("topic.yaml", line)
    assert why in str(e.value) and "topic.yaml" in str(e.value)


TOPIC = """summary: s
origin: o
last_update: 2026-12-07
state: local
tests:
  - test-opt
  - {line}
"""


def test_topic_yaml_holds_test_lines_and_a_bad_one_is_one_line_naming_it():
    from orchestrator.patchset.queue import parse_topic_meta

    meta, _ = parse_topic_meta("t/topic.yaml", TOPIC.format(line="test-backend-ops -o CONCAT"))
    assert meta.tests == ["test-opt", "test-backend-ops -o CONCAT"]
    with pytest.raises(ConfigError) as e:
        parse_topic_meta("t/topic.yaml", TOPIC.format(line="make check"))
    assert str(e.value).startswith(
        "t/topic.yaml:7: tests[1]: 'make check' is not a test program and its arguments"
    )


@settings(max_examples=150)
@given(
    st.lists(
        st.sampled_from(
            [
                "    test_cases.emplace_back(new test_concat(type, ne, 7, 0, 0));",
                "    test_cases.emplace_back(new test_unary(GGML_UNARY_OP_GELU, type));",
                "    test_cases.emplace_back(new test_bin_bcast(op, type, ne, nr));",
                "struct test_x : public test_case {",
                '        return "X_OP";',
                "    for (int dim : {0, 1}) {",
                "    }",
                "",
            ]
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from([EVAL, PERF, "struct test_mul_mat : public test_case {", ""]),
)
def test_any_cases_give_lines_that_read_back_or_one_refusal(added, section):
    try:
        inferred = infer_tests("x.diff", FIX + cases(*added, section=section))
    except NoTestsInferred as e:
        assert parse_test_line("tests", e.line)[0].startswith("test-")
        return
    for line in inferred.lines:
        program, args = parse_test_line("tests", line)
        assert program == "test-backend-ops" and args[0] == "-o"
        assert all(op.isupper() or "_" in op for op in args[1].split(","))
