"""Issue 16, points 5-7 (the pure part): matrix values validated at load time with file:line
(POSIX env names, finite timeouts, plain keys, PyPI names and PEP 440 versions), YAML bounds
(alias bombs, deep nesting), absolute paths, the series' CRLF and .git/ rules, temporary names."""

import json
import os
import shutil
import textwrap
import time

import pytest

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.patchset.files import read_series
from orchestrator.sources import pypi_sdist

from ..helpers.security import BOMB_1K, BOMB_276, ROOT, tiny_matrix

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def series_copy(tmp_path):
    d = tmp_path / "series"
    shutil.copytree(ROOT / "patches" / "accumulator-reset", d)
    return d, sorted(d.glob("*.patch"))


def test_paths_are_absolute_once_loaded(tmp_path, monkeypatch):
    m = tiny_matrix(tmp_path)
    monkeypatch.chdir(tmp_path)
    matrix = load_matrix("matrix.yaml")
    assert (
        matrix.path.is_absolute()
        and matrix.queue_dir.is_absolute()
        and matrix.native_tests_dir.is_absolute()
    )
    assert Cache("rel").root == tmp_path / "rel"
    assert matrix.target("tiny").source.base_dir.is_absolute()
    assert m.exists()


@pytest.mark.parametrize("key", ["A=B", "1X", "A B", "", "A-B"])
def test_env_keys_are_posix_names(tmp_path, key):
    m = tiny_matrix(tmp_path, backends=f"  cpu: {{env: {{'{key}': '1'}}}}\n")
    with pytest.raises(ConfigError) as e:
        load_matrix(m)
    assert str(e.value).startswith(f"{m}:8: backends.cpu.env"), str(e.value)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", ".NaN", ".Inf"])
def test_timeouts_are_finite(tmp_path, value):
    m = tiny_matrix(tmp_path, backends=f"  cpu: {{timeout: {value}}}\n")
    with pytest.raises(ConfigError) as e:
        load_matrix(m)
    assert str(e.value).startswith(f"{m}:8: backends.cpu.timeout: ") and "finite" in str(e.value), (
        str(e.value)
    )


@pytest.mark.parametrize("key", ["[a, b]", "{a: 1}", "? [x]\n  "])
def test_collections_as_keys_are_one_line(tmp_path, key):
    m = tiny_matrix(tmp_path)
    m.write_text(m.read_text().replace("backends:\n", f"backends:\n  {key}: 1\n", 1))
    with pytest.raises(ConfigError) as e:
        load_matrix(m)
    msg = str(e.value)
    assert msg.startswith(f"{m}:8: ") and "as a key" in msg and "\n" not in msg, msg


def test_a_crlf_converted_series_is_refused_not_normalised(tmp_path):
    d, patches = series_copy(tmp_path)
    patches[0].write_bytes(patches[0].read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(ConfigError, match=r"0001-.*CRLF line endings"):
        read_series(d, "llama.cpp")


def test_carriage_returns_inside_hunks_are_kept_byte_for_byte(tmp_path):
    d, patches = series_copy(tmp_path)
    text = patches[1].read_bytes()
    marker = b"+static"
    i = text.index(marker)
    j = text.index(b"\n", i)
    # one added line of a CRLF file: content, kept
    patches[1].write_bytes(text[:j] + b"\r" + text[j:])
    series = read_series(d, "llama.cpp")
    assert series.patches[1].text().encode() == patches[1].read_bytes()


@pytest.mark.parametrize("path", ["src/.git/config", ".GIT/hooks/x", "a/.Git/x"])
def test_dot_git_in_any_case_anywhere(tmp_path, path):
    from orchestrator.patchset.series import parse_patch

    text = (
        f"Subject: x\n\ndiff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n"
        f"+++ b/{path}\n@@ -0,0 +1 @@\n+x\n"
    )
    with pytest.raises(ConfigError, match=r"\.git"):
        parse_patch("0001-x.patch", text)


def test_temporary_entries_carry_their_pid(tmp_path):
    cache = Cache(tmp_path / "cache")
    prefix = cache.scratch_prefix("extract")
    assert prefix.startswith("extract-") and f"-pid{os.getpid()}-" in prefix


@pytest.mark.parametrize(
    "package, version, phrase",
    [
        ("--index-url=http://evil", "1.0", "package"),
        ("-r/etc/passwd", "1.0", "package"),
        ("a b", "1.0", "package"),
        ("pkg.", "1.0", "package"),
        ("_pkg", "1.0", "package"),
        ("pkg", ">=1.0", "version"),
        ("pkg", "1.0; rm -rf /", "version"),
        ("pkg", "latest", "version"),
        ("pkg", "1.0 --pre", "version"),
        ("pkg", "==1.0", "version"),
    ],
)
def test_package_and_version_follow_pypis_rules(tmp_path, package, version, phrase):
    m = tiny_matrix(
        tmp_path,
        source=f"{{kind: pypi-sdist, package: '{package}', version: '{version}', "
        f"sha256: {'a' * 64}}}",
    )
    with pytest.raises(ConfigError) as e:
        load_matrix(m)
    msg = str(e.value)
    assert msg.startswith(f"{m}:6: targets.tiny.source.{phrase}: "), msg


@pytest.mark.parametrize(
    "package, version",
    [
        ("llama-cpp-python", "0.3.36"),
        ("ggml_python", "0.0.45"),
        ("A.b-c_d", "1!2.0rc1.post3.dev4"),
        ("x", "1.0+local.7"),
    ],
)
def test_real_names_and_versions_pass(tmp_path, package, version):
    m = tiny_matrix(
        tmp_path,
        source=f"{{kind: pypi-sdist, package: '{package}', version: '{version}', "
        f"sha256: {'a' * 64}}}",
    )
    assert load_matrix(m).target("tiny").source["version"] == version


def test_json_listing_parse():
    """The JSON form is preferred: its hashes come with each file."""
    listing = {
        "files": [
            {
                "filename": "evilpkg-1.0.tar.gz",
                "url": "https://f/evilpkg-1.0.tar.gz",
                "hashes": {"sha256": "c" * 64},
            },
            {"filename": "evilpkg-1.0-py3-none-any.whl", "url": "https://f/w.whl", "hashes": {}},
        ]
    }
    files = pypi_sdist.parse_listing(json.dumps(listing), JSON_TYPE, "https://i/simple/evilpkg/")
    assert [(f.filename, f.sha256) for f in files] == [
        ("evilpkg-1.0.tar.gz", "c" * 64),
        ("evilpkg-1.0-py3-none-any.whl", None),
    ]


def test_the_bombs_are_the_sizes_the_issue_names():
    assert len(BOMB_276.encode()) == 276
    assert 900 <= len(BOMB_1K.encode()) <= 1100


def test_a_bomb_inside_a_real_key_is_refused_too(tmp_path):
    m = tiny_matrix(tmp_path)
    m.write_text(
        m.read_text().replace(
            "    layout: ggml\n",
            "    layout: ggml\n    description:\n" + textwrap.indent(BOMB_1K, "      "),
            1,
        )
    )
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="alias"):
        load_matrix(m)
    assert time.monotonic() - t0 < 1.0


def test_a_few_aliases_are_fine(tmp_path):
    m = tiny_matrix(tmp_path, backends="  cpu: &cpu {timeout: 60}\n  vulkan: *cpu\n")
    assert load_matrix(m).backend("vulkan").timeout == 60.0


def test_deep_nesting_is_one_line(tmp_path):
    m = tmp_path / "matrix.yaml"
    m.write_text("queue: " + "[" * 5000 + "]" * 5000 + "\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="nested"):
        load_matrix(m)
    assert time.monotonic() - t0 < 2.0
