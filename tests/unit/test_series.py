"""The patch series: parse the real patches/, round trip,
re-target to the ggml layout, bad input, diffs.

Real git runs in temporary directories (no network, no builds).
"""

import dataclasses
import difflib

import pytest
import unidiff
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import ConfigError, ExitCode
from orchestrator.model.layout import RegistrationError, get_layout, register_gate_test
from orchestrator.patchset.render import render
from orchestrator.patchset.series import (
    Series,
    git_blob_id,
    parse_patch,
    parse_series,
    unified_file_diff,
)

from ..helpers.patches import (
    GATE_PATCH,
    GGML,
    GGML_CMAKE,
    HDR,
    LLAMA,
    NATIVE_TEST,
    PATCH_DIR,
    WHISPER,
    BaseFiles,
    upstream_series,
)
from ..helpers.patches import read_patch as _read
from ..helpers.patches import real_series as _real_series

FIX_NAME = "0001-ggml-opt-reset-gradient-accumulators-after-each-opti.patch"
TEST_NAME = "0003-tests-add-test-opt-dynamic-accum-for-per-step-gradie.patch"
OPT_NAME = "0002-tests-add-test-opt-cases-with-non-static-graphs.patch"
AUTHOR = "ggml-patch maintainers <ggml-patch@users.noreply.github.com>"


# ggml's tests/CMakeLists.txt around test-opt


# ---- the real series ----


def test_real_series_parses():
    s = _real_series()
    assert s.layout == "llama.cpp"
    assert [p.name for p in s.patches] == [FIX_NAME, TEST_NAME]
    assert [[f.path for f in p.files] for p in s.patches] == [
        ["ggml/src/ggml-opt.cpp"],
        ["tests/CMakeLists.txt", "tests/test-opt-dynamic-accum.cpp"],
    ]


def test_upstream_series_is_the_fix_alone_then_test_opt_cases():
    """No new file under tests/ (AGENTS.md); 0001 touches only the reset (a flag the eval after an
    optimizer step sets, the loop in the next alloc)."""
    s = upstream_series()
    assert [p.name for p in s.patches] == [FIX_NAME, OPT_NAME]
    assert [[f.path for f in p.files] for p in s.patches] == [
        ["ggml/src/ggml-opt.cpp"],
        ["tests/test-opt.cpp"],
    ]
    assert all("new file mode" not in f.text for p in s.patches for f in p.files)
    fix = s.patches[0].files[0].text
    assert fix.count("\n+ ") == 12 and "GGML_ASSERT" not in fix and fix.isascii()
    comments = [line for line in fix.splitlines() if line.startswith("+") and "//" in line]
    # one line each, in the header's wording, at most 100 characters (the review's nit)
    assert len(comments) == 3 and "non-static graphs" in comments[0]
    assert all(len(c) - 1 <= 100 for c in comments)
    added = [
        line
        for line in s.patches[1].files[0].text.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    ]
    assert len(added) <= 150 and all(line.isascii() for line in added)
    assert "ggml_opt_grad_acc" not in "".join(added)  # NULL gb_opt in per-step mode (a known limit)


@pytest.mark.parametrize("name", [FIX_NAME, OPT_NAME])
def test_real_patch_round_trip(name):
    p = parse_patch(name, _read(name))
    assert p.text().encode("utf-8") == (PATCH_DIR / name).read_bytes()
    assert p.header.startswith(
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
    )
    assert not p.header.count("diff --git")
    assert all(f.text.startswith("diff --git a/") for f in p.files)
    assert p.trailer == ""


def test_gate_patch_round_trip():
    text = GATE_PATCH.read_bytes().decode("utf-8")
    assert parse_patch(TEST_NAME, text).text() == text


def test_real_subjects_and_authors():
    s = _real_series()
    assert [p.subject for p in s.patches] == [
        "ggml-opt : reset gradient accumulators after each optimizer step",
        "tests : add test-opt-dynamic-accum for per-step gradient accumulation",
    ]
    assert [p.author for p in s.patches] == [AUTHOR, AUTHOR]


def test_subject_and_author_fallbacks():
    diff = "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    p = parse_patch("0001-x.patch", "no mail header\n\n" + diff)
    assert p.subject == "0001-x.patch" and p.author == ""
    p = parse_patch("0001-x.patch", "Subject: plain subject\n\n" + diff)
    assert p.subject == "plain subject"


def test_real_paths_and_fix_paths():
    s = _real_series()
    assert s.paths() == [
        "ggml/src/ggml-opt.cpp",
        "tests/CMakeLists.txt",
        "tests/test-opt-dynamic-accum.cpp",
    ]
    assert s.fix_paths() == ["ggml/src/ggml-opt.cpp"]


def test_fix_paths_of_a_prefixed_render():
    vendored = get_layout("llama.cpp", "core/vendor/llama.cpp")
    r = render(_real_series(), LLAMA, vendored, BaseFiles({}))
    assert r.fix_paths() == ["core/vendor/llama.cpp/ggml/src/ggml-opt.cpp"]


def test_gate_test_source_is_native_test():
    src = _real_series().gate_test_source()
    assert src == NATIVE_TEST.read_bytes().decode("utf-8")


def test_gate_test_source_absent():
    fix_only = parse_series("llama.cpp", [(FIX_NAME, _read(FIX_NAME))])
    assert fix_only.gate_test_source() is None
    assert fix_only.patches[0].files[0].added_content is None  # a modification, not a creation


def test_sha256_is_stable_and_content_sensitive():
    a, b = _real_series(), _real_series()
    assert a.sha256 == b.sha256 and len(a.sha256) == 64
    renamed = Series(
        a.layout, (a.patches[0], dataclasses.replace(a.patches[1], name="0002-other.patch"))
    )
    assert renamed.sha256 != a.sha256
    edited = Series(
        a.layout,
        (a.patches[0], dataclasses.replace(a.patches[1], header=a.patches[1].header + " ")),
    )
    assert edited.sha256 != a.sha256


def test_llama_registration_matches_the_series_hunk():
    """register_gate_test on the hunk's old side gives exactly the hunk's new side."""
    reg = _real_series().patches[1].files[0]
    hunk = unidiff.PatchSet(reg.text)[0][0]
    old = "".join(line.value for line in hunk if not line.is_added)
    new = "".join(line.value for line in hunk if not line.is_removed)
    assert register_gate_test(LLAMA, old) == new


# ---- render ----


def test_render_to_ggml_maps_paths():
    base = BaseFiles({"tests/CMakeLists.txt": GGML_CMAKE})
    s = _real_series()
    r = render(s, LLAMA, GGML, base)
    assert r.layout == "ggml"
    assert base.calls == ["tests/CMakeLists.txt"]
    fix = r.patches[0].files[0]
    assert fix.path == "src/ggml-opt.cpp"
    head, _, body = fix.text.partition("\n@@")
    assert head.splitlines() == [
        "diff --git a/src/ggml-opt.cpp b/src/ggml-opt.cpp",
        "index 53903defa8f419069f3046b960f2f057e06e6263..da5fbc8bf282283d25a514cb1a561f34a49fbc0d "
        "100644",
        "--- a/src/ggml-opt.cpp",
        "+++ b/src/ggml-opt.cpp",
    ]
    assert body == s.patches[0].files[0].text.partition("\n@@")[2]  # hunks untouched
    # commit messages untouched, names untouched
    assert [p.header for p in r.patches] == [p.header for p in s.patches]
    assert [p.name for p in r.patches] == [p.name for p in s.patches]
    assert r.paths() == [
        "src/ggml-opt.cpp",
        "tests/CMakeLists.txt",
        "tests/test-opt-dynamic-accum.cpp",
    ]
    assert r.fix_paths() == ["src/ggml-opt.cpp"]


def test_render_to_ggml_regenerates_the_registration():
    r = render(_real_series(), LLAMA, GGML, BaseFiles({"tests/CMakeLists.txt": GGML_CMAKE}))
    reg, new_test = r.patches[1].files
    assert reg.path == "tests/CMakeLists.txt"
    assert reg.text == unified_file_diff(
        "tests/CMakeLists.txt", GGML_CMAKE, register_gate_test(GGML, GGML_CMAKE)
    )
    assert "llama_build_and_test" not in reg.text
    assert "+    set(TEST_TARGET test-opt-dynamic-accum)\n" in reg.text
    assert new_test == _real_series().patches[1].files[1]
    assert r.gate_test_source() == NATIVE_TEST.read_text()


def test_render_to_ggml_round_trips_through_text():
    r = render(_real_series(), LLAMA, GGML, BaseFiles({"tests/CMakeLists.txt": GGML_CMAKE}))
    again = parse_series("ggml", [(p.name, p.text()) for p in r.patches])
    assert again == r


def test_render_same_layout_is_identity():
    s = _real_series()
    base = BaseFiles({})
    assert render(s, LLAMA, LLAMA, base) is s
    assert render(s, LLAMA, get_layout("llama.cpp"), base) is s
    # only to see it is the file the hunk was made for
    assert base.calls == ["tests/CMakeLists.txt"] * 2


def test_render_same_layout_regenerates_a_registration_made_for_another_file():
    """Upstream moved the lines around test-opt: the registration follows the layout's rule
    instead of failing on stale context; the fix's hunks stay as they are."""
    s = _real_series()
    moved = (
        "# tests\nif (NOT LLAMA_SANITIZE_ADDRESS)\n    llama_build_and_test(test-opt.cpp)\n"
        "endif()\n"
    )
    r = render(s, LLAMA, LLAMA, BaseFiles({"tests/CMakeLists.txt": moved}))
    reg = next(f for f in r.patches[1].files if f.path == "tests/CMakeLists.txt")
    assert "+    llama_build_and_test(test-opt-dynamic-accum.cpp)\n" in reg.text
    assert r.patches[0] == s.patches[0]


def test_render_same_project_other_prefix_keeps_the_registration_hunk():
    s = _real_series()
    base = BaseFiles({})
    dst = get_layout("llama.cpp", "core/vendor/llama.cpp/")
    r = render(s, LLAMA, dst, base)
    # same convention, no other file to compare with: the
    # series' own hunk is mapped, not regenerated
    assert base.calls == ["core/vendor/llama.cpp/tests/CMakeLists.txt"]
    assert r.paths() == ["core/vendor/llama.cpp/" + p for p in s.paths()]
    reg = r.patches[1].files[0]
    assert reg.text.startswith(
        "diff --git a/core/vendor/llama.cpp/tests/CMakeLists.txt "
        "b/core/vendor/llama.cpp/tests/CMakeLists.txt\n"
    )
    assert "+  llama_build_and_test(test-opt-dynamic-accum.cpp)\n" in reg.text
    new = r.patches[1].files[1]
    assert (
        "--- /dev/null\n+++ b/core/vendor/llama.cpp/tests/test-opt-dynamic-accum.cpp\n" in new.text
    )


def test_render_to_prefixed_ggml_asks_for_the_prefixed_base():
    dst = get_layout("ggml", "vendor/ggml")
    base = BaseFiles({"vendor/ggml/tests/CMakeLists.txt": GGML_CMAKE})
    r = render(_real_series(), LLAMA, dst, base)
    assert base.calls == ["vendor/ggml/tests/CMakeLists.txt"]
    assert r.patches[1].files[0].text.startswith("diff --git a/vendor/ggml/tests/CMakeLists.txt ")
    assert r.fix_paths() == ["vendor/ggml/src/ggml-opt.cpp"]


def test_render_whisper_keeps_llama_convention():
    whisper_cmake = "set(TEST_TARGET test-whisper)\nllama_build_and_test(test-opt.cpp)\n"
    base = BaseFiles({"tests/CMakeLists.txt": whisper_cmake})
    r = render(_real_series(), LLAMA, WHISPER, base)
    # same paths, but another project: the registration is regenerated from whisper.cpp's own file
    assert r.layout == "whisper.cpp"
    assert base.calls == ["tests/CMakeLists.txt"]
    assert r.paths() == _real_series().paths()
    assert r.patches[0] == _real_series().patches[0]
    assert r.patches[1].files[0].text == unified_file_diff(
        "tests/CMakeLists.txt",
        whisper_cmake,
        whisper_cmake + "llama_build_and_test(test-opt-dynamic-accum.cpp)\n",
    )


def test_render_missing_base_registration_file():
    with pytest.raises(ConfigError) as e:
        render(_real_series(), LLAMA, GGML, BaseFiles({}))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("tests/CMakeLists.txt: missing in the ggml base")


def test_render_base_without_test_opt():
    with pytest.raises(RegistrationError):
        render(
            _real_series(),
            LLAMA,
            GGML,
            BaseFiles({"tests/CMakeLists.txt": "add_definitions(-UNDEBUG)\n"}),
        )


def test_render_rejects_paths_outside_ggml():
    text = (
        "Subject: [PATCH] llama : touch libllama\n\n"
        "diff --git a/src/llama.cpp b/src/llama.cpp\nindex 1111111..2222222 100644\n"
        "--- a/src/llama.cpp\n+++ b/src/llama.cpp\n@@ -1 +1 @@\n-a\n+b\n"
    )
    s = parse_series("llama.cpp", [("0001-llama.patch", text)])
    with pytest.raises(ConfigError, match="src/llama.cpp"):
        render(s, LLAMA, GGML, BaseFiles({}))


def test_render_maps_rename_headers():
    text = (
        "Subject: [PATCH] ggml : rename\n\n"
        "diff --git a/ggml/src/old-name.c b/ggml/src/new-name.c\n"
        "similarity index 90%\nrename from ggml/src/old-name.c\nrename to ggml/src/new-name.c\n"
        "index 1111111..2222222 100644\n--- a/ggml/src/old-name.c\n+++ b/ggml/src/new-name.c\n"
        "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
    )
    s = parse_series("llama.cpp", [("0001-rename.patch", text)])
    r = render(s, LLAMA, GGML, BaseFiles({}))
    f = r.patches[0].files[0]
    assert f.path == "src/new-name.c"
    assert f.text == text.split("\n\n", 1)[1].replace("ggml/src/", "src/")


def test_render_new_and_deleted_files_keep_dev_null():
    text = (
        "Subject: [PATCH] ggml : add and remove\n\n"
        "diff --git a/ggml/include/new.h b/ggml/include/new.h\nnew file mode 100644\n"
        "index 0000000..1111111\n--- /dev/null\n+++ b/ggml/include/new.h\n@@ -0,0 +1 @@\n"
        "+#pragma once\ndiff --git a/ggml/src/gone.c b/ggml/src/gone.c\ndeleted file mode 100644\n"
        "index 1111111..0000000\n--- a/ggml/src/gone.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-int x;\n"
    )
    s = parse_series("llama.cpp", [("0001-x.patch", text)])
    r = render(s, LLAMA, GGML, BaseFiles({}))
    new, gone = r.patches[0].files
    assert (new.path, gone.path) == ("include/new.h", "src/gone.c")
    assert "--- /dev/null\n+++ b/include/new.h\n" in new.text
    assert "--- a/src/gone.c\n+++ /dev/null\n" in gone.text
    assert new.added_content == "#pragma once\n"


# ---- bad input ----

GOOD_DIFF = (
    "diff --git a/ggml/src/x.c b/ggml/src/x.c\nindex 1111111..2222222 100644\n"
    "--- a/ggml/src/x.c\n+++ b/ggml/src/x.c\n@@ -1 +1 @@\n-a\n+b\n"
)


def test_empty_series():
    with pytest.raises(ConfigError) as e:
        parse_series("llama.cpp", [])
    assert str(e.value) == "the series is empty: no *.patch files"
    assert e.value.exit_code == ExitCode.CONFIG


BAD = {
    "no-diff": (HDR + "just a commit message, no diff\n", "no 'diff --git' section"),
    "empty-file": ("", "no 'diff --git' section"),
    "dotdot": (
        HDR
        + "diff --git a/../etc/x b/../etc/x\nindex 1..2 100644\n--- a/../etc/x\n+++ b/../etc/x\n"
        "@@ -1 +1 @@\n-a\n+b\n",
        "path '../etc/x' escapes the source tree",
    ),
    "dotdot-inside": (
        HDR + "diff --git a/ggml/../../x b/ggml/../../x\nindex 1..2 100644\n"
        "--- a/ggml/../../x\n+++ b/ggml/../../x\n@@ -1 +1 @@\n-a\n+b\n",
        "escapes the source tree",
    ),
    "dotdot-target-only": (
        HDR + "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/../x\n@@ -1 +1 @@\n-a\n+b\n",
        "path '../x' escapes the source tree",
    ),
    "dotdot-rename": (
        HDR + "diff --git a/x b/x\nsimilarity index 90%\nrename from x\nrename to ../y\n"
        "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n",
        "path '../y' escapes the source tree",
    ),
    "absolute": (
        HDR + "diff --git a//etc/passwd b//etc/passwd\nindex 1..2 100644\n--- a//etc/passwd\n"
        "+++ b//etc/passwd\n@@ -1 +1 @@\n-a\n+b\n",
        "path '/etc/passwd' escapes the source tree",
    ),
    "git-binary": (
        HDR + "diff --git a/ggml/x.bin b/ggml/x.bin\nnew file mode 100644\nindex 0000000..1234567\n"
        "GIT binary patch\nliteral 3\nKcmZ?wy0Hxa\n\nliteral 0\nHcmV?d00001\n\n",
        "binary diff in 'diff --git a/ggml/x.bin b/ggml/x.bin'",
    ),
    "binary-files-differ": (
        HDR + "diff --git a/x.bin b/x.bin\nindex 1..2 100644\n"
        "Binary files a/x.bin and b/x.bin differ\n",
        "binary diff",
    ),
    "no-hunks": (HDR + "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n", "no hunks"),
    "truncated-hunk": (
        HDR + "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n",
        "corrupt diff: Hunk is shorter than expected",
    ),
    "second-file-bad": (
        HDR + GOOD_DIFF + "diff --git a/../y b/../y\nindex 1..2 100644\n--- a/../y\n+++ b/../y\n"
        "@@ -1 +1 @@\n-a\n+b\n",
        "path '../y' escapes",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_patch(case):
    text, phrase = BAD[case]
    name = f"0003-{case}.patch"
    with pytest.raises(ConfigError) as e:
        parse_patch(name, text)
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{name}: "), msg
    assert phrase in msg, msg
    # parse_series reports the same, naming the patch, even after good ones
    with pytest.raises(ConfigError) as e2:
        parse_series("llama.cpp", [(FIX_NAME, _read(FIX_NAME)), (name, text)])
    assert str(e2.value) == msg


@pytest.mark.parametrize("path", ["../x", "/etc/passwd"])
def test_no_prefix_escaping_path_is_rejected(path):
    text = (
        HDR + f"diff --git {path} {path}\nindex 1..2 100644\n--- "
        f"{path}\n+++ {path}\n@@ -1 +1 @@\n-a\n+b\n"
    )
    with pytest.raises(ConfigError, match="escapes the source tree|lacks git's a/ and b/ prefixes"):
        parse_patch("0001-x.patch", text)


def test_no_prefix_patch_is_rejected_or_retargeted():
    text = HDR + (
        "diff --git ggml/src/x.c ggml/src/x.c\nindex 1..2 100644\n--- ggml/src/x.c\n"
        "+++ ggml/src/x.c\n@@ -1 +1 @@\n-a\n+b\n"
    )
    try:
        s = parse_series("llama.cpp", [("0001-x.patch", text)])
    except ConfigError:
        return  # rejecting --no-prefix patches outright is fine too
    f = render(s, LLAMA, GGML, BaseFiles({})).patches[0].files[0]
    assert "ggml/src/x.c" not in f.text


def test_removed_dash_space_line_is_not_a_trailer():
    text = HDR + (
        "diff --git a/README.md b/README.md\nindex 1111111..2222222 100644\n--- a/README.md\n"
        "+++ b/README.md\n@@ -1,3 +1,2 @@\n a\n-- \n c\n-- \n2.39.5\n\n"
    )
    p = parse_patch("0001-x.patch", text)
    assert p.trailer == "-- \n2.39.5\n\n"
    assert p.text() == text


@pytest.mark.parametrize(
    "diff",
    [
        "diff --git a/ggml/src/empty.h b/ggml/src/empty.h\nnew file mode 100644\nindex "
        "0000000000000000000000000000000000000000..e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\n",
        "diff --git a/ggml/src/a.c b/ggml/src/b.c\nsimilarity index 100%\n"
        "rename from ggml/src/a.c\nrename to ggml/src/b.c\n",
    ],
    ids=["new-empty-file", "pure-rename"],
)
def test_hunkless_git_diffs_are_valid(diff):
    p = parse_patch("0001-x.patch", HDR + diff)
    assert p.text() == HDR + diff


def test_deleting_an_empty_file_is_accepted():
    diff = (
        "diff --git a/ggml/src/empty.h b/ggml/src/empty.h\ndeleted file mode 100644\n"
        "index e69de29bb2d1d6434b8b29ae775ad8c2e48c5391..0000000000000000000000000000000000000000\n"
    )
    p = parse_patch("0001-x.patch", HDR + diff)
    assert [f.path for f in p.files] == ["ggml/src/empty.h"]


def test_trailer_is_kept_apart():
    text = HDR + GOOD_DIFF + "-- \n2.39.5\n\n"
    p = parse_patch("0001-x.patch", text)
    assert p.trailer == "-- \n2.39.5\n\n"
    assert p.files[0].text == GOOD_DIFF
    assert p.text() == text


# ---- git_blob_id / unified_file_diff, against real git ----


def test_git_blob_id_of_the_native_test_matches_the_series_index_line():
    src = NATIVE_TEST.read_bytes().decode()
    assert f"..{git_blob_id(src)}" in _real_series().patches[1].files[1].text


# ---- property: parse then write gives the same text ----

_WORD = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
    min_size=1,
    max_size=8,
)
_CONTENT_LINE = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 _;(){}=*/#<>", max_size=30)
_HEADER_LINE = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,:()[]'-_", max_size=60
).filter(lambda s: not s.startswith(("diff --git", "-- ")) and s != "--")
_PATH = st.tuples(
    st.sampled_from(["ggml/src/", "ggml/include/", "tests/", "ggml/src/ggml-cpu/"]),
    _WORD,
    st.sampled_from([".c", ".cpp", ".h", ".txt"]),
).map("".join)


@st.composite
def _file_diff(draw, path):
    kind = draw(st.sampled_from(["modify", "new", "delete"]))
    old = draw(st.lists(_CONTENT_LINE, min_size=1, max_size=12))
    if kind == "new":
        lines = draw(st.lists(_CONTENT_LINE, min_size=1, max_size=8))
        return (
            f"diff --git a/{path} b/{path}\nnew file mode 100644\nindex 0000000..{draw(_hex7())}\n"
            f"--- /dev/null\n+++ b/{path}\n"
            f"@@ -0,0 +1{',' + str(len(lines)) if len(lines) != 1 else ''} @@\n"
            + "".join(f"+{line}\n" for line in lines)
        )
    if kind == "delete":
        return (
            f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n"
            f"index {draw(_hex7())}..0000000\n--- a/{path}\n+++ /dev/null\n"
            f"@@ -1{',' + str(len(old)) if len(old) != 1 else ''} +0,0 @@\n"
            + "".join(f"-{line}\n" for line in old)
        )
    new = list(old)
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["insert", "delete", "replace"]))
        i = draw(st.integers(0, len(new)))
        if op == "insert" or not new:
            new.insert(i, draw(_CONTENT_LINE))
        elif op == "delete":
            del new[min(i, len(new) - 1)]
        else:
            new[min(i, len(new) - 1)] = draw(_CONTENT_LINE)
    if new == old:
        new.append("changed")
    body = list(
        difflib.unified_diff(
            [x + "\n" for x in old], [x + "\n" for x in new], n=draw(st.integers(0, 3))
        )
    )
    return (
        f"diff --git a/{path} b/{path}\nindex {draw(_hex7())}..{draw(_hex7())} 100644\n"
        f"--- a/{path}\n+++ b/{path}\n" + "".join(body[2:])
    )


def _hex7():
    return st.text(alphabet="0123456789abcdef", min_size=7, max_size=7)


@st.composite
def _patch_text(draw):
    paths = draw(st.lists(_PATH, min_size=1, max_size=3, unique=True))
    header = "".join(
        [
            "From 0123456789abcdef0123456789abcdef01234567 Mon Sep 17 00:00:00 2001\n"
            if draw(st.booleans())
            else "",
            f"From: {draw(_WORD)} <{draw(_WORD)}@example.com>\n",
            "Date: Mon, 30 Nov 2026 00:00:00 +0000\n",
            f"Subject: [PATCH{draw(st.sampled_from(['', ' 1/2', ' v2 3/9']))}] "
            f"{draw(_HEADER_LINE)}\n",
            "\n",
            "".join(line + "\n" for line in draw(st.lists(_HEADER_LINE, max_size=5))),
            "---\n" + "".join(f" {p} | 2 +-\n" for p in paths) + "\n"
            if draw(st.booleans())
            else "\n",
        ]
    )
    diffs = "".join(draw(_file_diff(p)) for p in paths)
    trailer = draw(st.sampled_from(["", "-- \n2.39.5\n\n", "-- \n2.43.0\n"]))
    return header + diffs + trailer, paths


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(_patch_text())
def test_parse_patch_round_trip(generated):
    text, paths = generated
    p = parse_patch("0001-generated.patch", text)
    assert p.text() == text
    assert [f.path for f in p.files] == paths
    assert all(f.text.startswith("diff --git a/") for f in p.files)
    assert parse_patch(p.name, p.text()) == p
