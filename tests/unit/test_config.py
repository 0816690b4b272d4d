"""matrix.yaml: the real file loads; every malformed file is one
line naming the file, the line and the key."""

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.config import Backend, Matrix, load_matrix
from orchestrator.errors import ConfigError, ExitCode

from ..helpers.tools import ROOT  # noqa: E402

SHA_LLAMA = "832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e"
SHA_GGML = "10aac52075cf3c7ef2b00d6c35b1c23f7b018dbeff8ae8df67339b4be1166f05"

# A copy of matrix.yaml's shape, owned by these tests (the real file may grow).
BASE = f"""\
# test matrix
queue:
  path: patches
  layout: llama.cpp
native_tests: native_tests

targets:
  llama.cpp:
    description: llama.cpp as vendored by llama-cpp-python 0.3.36
    layout: llama.cpp
    source:
      kind: pypi-sdist
      package: llama-cpp-python
      version: "0.3.36"
      sha256: {SHA_LLAMA}
      subdirectory: vendor/llama.cpp
  ggml:
    description: ggml as vendored by ggml-python 0.0.45
    layout: ggml
    source:
      kind: pypi-sdist
      package: ggml-python
      version: "0.0.45"
      sha256: {SHA_GGML}
      subdirectory: vendor/ggml

backends:
  cpu:
    cmake_flags: ["-DGGML_CPU=ON"]
    timeout: 300

profiles:
  default:
    targets: [llama.cpp, ggml]
    backends: [cpu]
"""

GGML_SOURCE = f"""\
    source:
      kind: pypi-sdist
      package: ggml-python
      version: "0.0.45"
      sha256: {SHA_GGML}
      subdirectory: vendor/ggml
"""
CPU_BACKEND = """\
  cpu:
    cmake_flags: ["-DGGML_CPU=ON"]
    timeout: 300
"""
TARGETS_SECTION = BASE[BASE.index("targets:\n") : BASE.index("backends:\n")]
BACKENDS_SECTION = BASE[BASE.index("backends:\n") : BASE.index("profiles:\n")]
PROFILES_SECTION = BASE[BASE.index("profiles:\n") :]
SERIES_SECTION = BASE[BASE.index("queue:\n") : BASE.index("native_tests:")]


def sub(old: str, new: str, text: str = BASE) -> str:
    assert text.count(old) == 1, f"{old!r} is not unique in the base matrix"
    return text.replace(old, new)


def line_of(text: str, line: str, after: str = None) -> int:
    """1-based number of the first line equal to `line` (after the first line equal to `after`)."""
    lines = text.splitlines()
    start = lines.index(after) if after is not None else 0
    return lines.index(line, start) + 1


def _write(tmp_path: Path, text: str, name: str = "matrix.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


# ---- the real file and the base copy ----


def test_real_matrix_loads():
    m = load_matrix(ROOT / "matrix.yaml")
    assert isinstance(m, Matrix)
    assert list(m.targets)[:2] == ["llama.cpp", "ggml"]
    assert list(m.backends) == ["cpu", "vulkan", "cuda", "metal", "cpu-sanitize"]
    assert "default" in m.profiles
    assert m.profiles["default"] == (("llama.cpp", "ggml"), ("cpu", "vulkan", "cuda", "metal"))
    # the sanitizers cost more than the answer: a profile of their own, not the default run
    assert m.profiles["sanitize"] == (("llama.cpp", "ggml"), ("cpu-sanitize",))
    # the default profile needs nothing but package registries
    assert all(m.targets[t].source.kind == "pypi-sdist" for t in m.profiles["default"][0])
    assert m.queue_dir == ROOT / "patches" and m.series_layout == "llama.cpp"
    assert m.native_tests_dir == ROOT / "native_tests"
    llama, ggml = m.targets["llama.cpp"], m.targets["ggml"]
    assert (llama.layout, ggml.layout) == ("llama.cpp", "ggml")
    assert llama.prefix == "" and ggml.prefix == ""
    for t, package in ((llama, "llama-cpp-python"), (ggml, "ggml-python")):
        assert t.source.kind == "pypi-sdist"
        assert t.source["package"] == package
        assert isinstance(t.source["version"], str)
        assert len(t.source["sha256"]) == 64
        assert t.source.key == f"targets.{t.name}.source"
    cpu = m.backends["cpu"]
    assert "-DGGML_CPU=ON" in cpu.cmake_flags
    assert isinstance(cpu.timeout, float) and cpu.timeout > 0


def test_real_matrix_cells():
    m = load_matrix(ROOT / "matrix.yaml")
    cells = m.cells()
    assert [(t.name, b.name) for t, b in cells] == [
        (t, b) for t in ("llama.cpp", "ggml") for b in ("cpu", "vulkan", "cuda", "metal")
    ]
    assert [(t.name, b.name) for t, b in m.cells("sanitize")] == [
        ("llama.cpp", "cpu-sanitize"),
        ("ggml", "cpu-sanitize"),
    ]
    assert [(t.name, b.name) for t, b in m.cells(targets=["ggml"], backends=["cpu"])] == [
        ("ggml", "cpu")
    ]


def test_base_matrix_resolves(tmp_path):
    m = load_matrix(_write(tmp_path, BASE))
    assert m.path == tmp_path / "matrix.yaml"
    assert m.queue_dir == tmp_path / "patches"
    assert m.native_tests_dir == tmp_path / "native_tests"
    assert m.backends["cpu"] == Backend("cpu", ("-DGGML_CPU=ON",), {}, (), 300.0, "ubuntu-24.04")
    assert m.targets["ggml"].source.options == {
        "kind": "pypi-sdist",
        "package": "ggml-python",
        "version": "0.0.45",
        "sha256": SHA_GGML,
        "subdirectory": "vendor/ggml",
    }
    assert m.targets["ggml"].source.get("url") is None
    assert m.targets["ggml"].description == "ggml as vendored by ggml-python 0.0.45"
    # node marks are kept for later messages
    assert m.lines[("backends", "cpu", "timeout")] == line_of(BASE, "    timeout: 300")
    assert m.lines[("targets", "ggml")] == line_of(BASE, "  ggml:")


def test_optional_keys_and_defaults(tmp_path):
    text = sub("native_tests: native_tests\n", "")
    text = sub(
        CPU_BACKEND,
        '  cpu: {}\n  vulkan:\n    cmake_flags: ["-DGGML_VULKAN=ON", "-DGGML_CPU:BOOL=ON"]\n'
        '    env: {GGML_VK_VISIBLE_DEVICES: "0"}\n    tools: [glslc]\n    timeout: 12.5\n'
        "    runs_on: gpu-runner\n",
        text,
    )
    text = sub("    layout: ggml\n", "    layout: ggml\n    prefix: vendor/ggml\n", text)
    m = load_matrix(_write(tmp_path, text))
    assert m.native_tests_dir == tmp_path / "native_tests"
    assert m.backends["cpu"] == Backend("cpu")
    assert m.backends["cpu"].timeout == 600.0
    assert m.backends["vulkan"] == Backend(
        "vulkan",
        ("-DGGML_VULKAN=ON", "-DGGML_CPU:BOOL=ON"),
        {"GGML_VK_VISIBLE_DEVICES": "0"},
        ("glslc",),
        12.5,
        "gpu-runner",
    )
    assert m.targets["ggml"].prefix == "vendor/ggml"


@pytest.mark.parametrize(
    "source, options",
    [
        (
            "    source:\n      kind: git\n      url: https://github.com/ggml-org/ggml\n"
            "      ref: v0.9.4\n",
            {"kind": "git", "url": "https://github.com/ggml-org/ggml", "ref": "v0.9.4"},
        ),
        (
            "    source:\n      kind: tarball\n      url: https://example.com/ggml.tar.gz\n"
            f"      sha256: {SHA_GGML}\n      subdirectory: ggml-0.9.4\n",
            {
                "kind": "tarball",
                "url": "https://example.com/ggml.tar.gz",
                "sha256": SHA_GGML,
                "subdirectory": "ggml-0.9.4",
            },
        ),
        (
            "    source:\n      kind: local\n      path: ../ggml\n",
            {"kind": "local", "path": "../ggml"},
        ),
    ],
)
def test_other_source_kinds(tmp_path, source, options):
    m = load_matrix(_write(tmp_path, sub(GGML_SOURCE, source)))
    assert m.targets["ggml"].source.kind == options["kind"]
    assert m.targets["ggml"].source.options == options


# ---- malformed matrices ----


def _bad(text, line, key, phrase, marks=()):
    return pytest.param(text, line, key, phrase, marks=marks)


_SHA_LINE = f"      sha256: {SHA_GGML}"
_CASES = {
    # YAML itself
    "yaml-bad-indent": (
        sub("  layout: llama.cpp\nnative_tests", " layout: llama.cpp\nnative_tests"),
        (" layout: llama.cpp",),
        None,
        "invalid YAML",
    ),
    "yaml-tab": (
        sub("    timeout: 300", "\ttimeout: 300"),
        ("\ttimeout: 300",),
        None,
        "invalid YAML",
    ),
    "yaml-two-documents": (BASE + "---\nextra: 1\n", ("---",), None, "invalid YAML"),
    "yaml-unclosed-flow": (
        sub('    cmake_flags: ["-DGGML_CPU=ON"]\n', '    cmake_flags: ["-DGGML_CPU=ON"\n'),
        ("    timeout: 300",),
        None,
        "invalid YAML",
    ),
    "empty-file": ("", 1, None, "the matrix is empty"),
    "only-comments": ("# nothing here\n\n", 1, None, "the matrix is empty"),
    "top-level-list": (
        "- series\n- targets\n",
        1,
        None,
        "expected a mapping at the top level, got list",
    ),
    "top-level-scalar": ("hello\n", 1, None, "expected a mapping at the top level, got str"),
    "duplicate-top-level-key": (
        BASE + "backends:\n  cuda: {}\n",
        ("backends:", "profiles:"),
        "backends",
        "duplicate key",
    ),
    "duplicate-nested-key": (
        sub("    timeout: 300\n", "    timeout: 300\n    timeout: 30\n"),
        ("    timeout: 30",),
        "backends.cpu.timeout",
        "duplicate key",
    ),
    # top level
    "unknown-top-level-key": (
        sub("targets:\n", "targts:\n"),
        ("targts:",),
        "targts",
        "unknown key; did you mean 'targets'?",
    ),
    "unknown-top-level-key-2": (
        BASE + "profile:\n  x: 1\n",
        ("profile:",),
        "profile",
        "did you mean 'profiles'?",
    ),
    "missing-series": (
        sub(SERIES_SECTION, ""),
        ("native_tests: native_tests",),
        "(top level)",
        "missing required key 'queue'",
    ),
    "missing-targets": (
        sub(TARGETS_SECTION, ""),
        ("queue:",),
        "(top level)",
        "missing required key 'targets'",
    ),
    "missing-backends": (
        sub(BACKENDS_SECTION, ""),
        ("queue:",),
        "(top level)",
        "missing required key 'backends'",
    ),
    "missing-profiles": (
        sub(PROFILES_SECTION, ""),
        ("queue:",),
        "(top level)",
        "missing required key 'profiles'",
    ),
    "native-tests-not-a-string": (
        sub("native_tests: native_tests", "native_tests: 5"),
        ("native_tests: 5",),
        "native_tests",
        "expected a string, got int 5",
    ),
    # series
    "series-missing-layout": (
        sub("  layout: llama.cpp\nnative", "native"),
        ("queue:",),
        "queue",
        "missing required key 'layout'",
    ),
    "series-missing-path": (
        sub("  path: patches\n", ""),
        ("queue:",),
        "queue",
        "missing required key 'path'",
    ),
    "series-unknown-layout": (
        sub("  layout: llama.cpp\nnative", "  layout: llama\nnative"),
        ("  layout: llama",),
        "queue.layout",
        "'llama' is not one of ggml, llama.cpp, whisper.cpp",
    ),
    # targets
    "targets-empty": (
        sub(TARGETS_SECTION, "targets: {}\n\n"),
        ("targets: {}",),
        "targets",
        "must not be empty",
    ),
    "targets-a-list": (
        sub(TARGETS_SECTION, "targets: [llama.cpp, ggml]\n\n"),
        ("targets: [llama.cpp, ggml]",),
        "targets",
        "got list",
    ),
    "target-unknown-key": (
        sub("    layout: ggml\n", "    layot: ggml\n"),
        ("    layot: ggml",),
        "targets.ggml.layot",
        "did you mean 'layout'?",
    ),
    "target-missing-layout": (
        sub("    layout: ggml\n", ""),
        ("  ggml:",),
        "targets.ggml",
        "missing required key 'layout'",
    ),
    "target-unknown-layout": (
        sub("    layout: ggml\n", "    layout: gml\n"),
        ("    layout: gml",),
        "targets.ggml.layout",
        "'gml' is not one of ggml, llama.cpp, whisper.cpp",
    ),
    "target-bad-name": (
        sub("  ggml:\n", "  'my ggml':\n"),
        ("  'my ggml':",),
        "targets.my ggml",
        "not a valid name",
    ),
    "prefix-dotdot": (
        sub("    layout: ggml\n", "    layout: ggml\n    prefix: ../outside/\n"),
        ("    prefix: ../outside/",),
        "targets.ggml.prefix",
        "must be a relative path inside the tree",
    ),
    "prefix-absolute": (
        sub("    layout: ggml\n", "    layout: ggml\n    prefix: /srv/ggml\n"),
        ("    prefix: /srv/ggml",),
        "targets.ggml.prefix",
        "no '..', not absolute",
    ),
    # sources
    "source-not-a-mapping": (
        sub(GGML_SOURCE, "    source: ggml-python==0.0.45\n"),
        ("    source: ggml-python==0.0.45",),
        "targets.ggml.source",
        "got str",
    ),
    "source-missing-kind": (
        sub(GGML_SOURCE, GGML_SOURCE.replace("      kind: pypi-sdist\n", "")),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'kind'",
    ),
    "source-unknown-kind": (
        sub(GGML_SOURCE, GGML_SOURCE.replace("kind: pypi-sdist", "kind: pypi")),
        ("      kind: pypi",),
        "targets.ggml.source.kind",
        "'pypi' is not one of pypi-sdist, git, local, tarball",
    ),
    "sha256-short": (
        sub(_SHA_LINE, "      sha256: 10aac520"),
        ("      sha256: 10aac520",),
        "targets.ggml.source.sha256",
        "'10aac520' is not a sha256",
    ),
    "sha256-uppercase": (
        sub(_SHA_LINE, "      sha256: " + SHA_GGML.upper()),
        ("      sha256: " + SHA_GGML.upper(),),
        "targets.ggml.source.sha256",
        "expected 64 lowercase hex digits",
    ),
    "sha256-65-digits": (
        sub(_SHA_LINE, _SHA_LINE + "0"),
        (_SHA_LINE + "0",),
        "targets.ggml.source.sha256",
        "is not a sha256",
    ),
    "sha256-trailing-newline": (
        sub(_SHA_LINE, f"      sha256: |\n        {SHA_GGML}"),
        ("      sha256: |",),
        "targets.ggml.source.sha256",
        "is not a sha256",
    ),
    "missing-package": (
        sub("      package: ggml-python\n", ""),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'package'",
    ),
    "missing-version": (
        sub('      version: "0.0.45"\n', ""),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'version'",
    ),
    "missing-sha256": (
        sub(_SHA_LINE + "\n", ""),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'sha256'",
    ),
    "version-float": (
        sub('version: "0.0.45"', "version: 1.0"),
        ("      version: 1.0",),
        "targets.ggml.source.version",
        "expected a string, got float 1.0",
    ),
    "version-float-looks-like-semver": (
        sub('version: "0.0.45"', "version: 1.10"),
        ("      version: 1.10",),
        "targets.ggml.source.version",
        "got float 1.1",
    ),
    "version-int": (
        sub('version: "0.0.45"', "version: 3"),
        ("      version: 3",),
        "targets.ggml.source.version",
        "expected a string, got int 3",
    ),
    "pypi-unknown-key": (
        sub("      subdirectory: vendor/ggml\n", "      subdir: vendor/ggml\n"),
        ("      subdir: vendor/ggml",),
        "targets.ggml.source.subdir",
        "did you mean 'subdirectory'?",
    ),
    "local-with-sha256": (
        sub(
            GGML_SOURCE,
            f"    source:\n      kind: local\n      path: ../ggml\n      sha256: {SHA_GGML}\n",
        ),
        (f"      sha256: {SHA_GGML}",),
        "targets.ggml.source.sha256",
        "unknown key (allowed: kind, path, subdirectory)",
    ),
    "git-missing-ref": (
        sub(
            GGML_SOURCE,
            "    source:\n      kind: git\n      url: https://github.com/ggml-org/ggml\n",
        ),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'ref'",
    ),
    "tarball-missing-url": (
        sub(GGML_SOURCE, f"    source:\n      kind: tarball\n      sha256: {SHA_GGML}\n"),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'url'",
    ),
    "local-missing-path": (
        sub(GGML_SOURCE, "    source:\n      kind: local\n"),
        ("    source:", "  ggml:"),
        "targets.ggml.source",
        "missing required key 'path'",
    ),
    "subdirectory-dotdot": (
        sub("subdirectory: vendor/ggml", "subdirectory: ../ggml"),
        ("      subdirectory: ../ggml",),
        "targets.ggml.source.subdirectory",
        "'../ggml' must be a relative path inside the tree",
    ),
    "subdirectory-dotdot-inside": (
        sub("subdirectory: vendor/ggml", "subdirectory: vendor/../../ggml"),
        ("      subdirectory: vendor/../../ggml",),
        "targets.ggml.source.subdirectory",
        "must be a relative path inside the tree",
    ),
    "subdirectory-absolute": (
        sub("subdirectory: vendor/ggml", "subdirectory: /vendor/ggml"),
        ("      subdirectory: /vendor/ggml",),
        "targets.ggml.source.subdirectory",
        "'/vendor/ggml' must be a relative path",
    ),
    # backends
    "backends-empty": (
        sub(BACKENDS_SECTION, "backends: {}\n\n"),
        ("backends: {}",),
        "backends",
        "must not be empty",
    ),
    "backends-null": (
        sub(BACKENDS_SECTION, "backends:\n\n"),
        ("backends:",),
        "backends",
        "got NoneType None",
    ),
    "backend-unknown-name": (
        sub("  cpu:\n", "  vulkn:\n"),
        ("  vulkn:",),
        "backends.vulkn",
        "did you mean 'vulkan'?",
    ),
    "backend-unknown-key": (
        sub("    timeout: 300\n", "    timeout: 300\n    cmake_flag: []\n"),
        ("    cmake_flag: []",),
        "backends.cpu.cmake_flag",
        "did you mean 'cmake_flags'?",
    ),
    "backend-not-a-mapping": (
        sub(CPU_BACKEND, "  cpu: yes\n"),
        ("  cpu: yes",),
        "backends.cpu",
        "got bool True",
    ),
    "cmake-flags-not-a-list": (
        sub('cmake_flags: ["-DGGML_CPU=ON"]', 'cmake_flags: "-DGGML_CPU=ON"'),
        ('    cmake_flags: "-DGGML_CPU=ON"',),
        "backends.cpu.cmake_flags",
        "got str",
    ),
    "cmake-flags-ints": (
        sub('cmake_flags: ["-DGGML_CPU=ON"]', "cmake_flags:\n      - 1\n      - 2"),
        ("      - 1",),
        "backends.cpu.cmake_flags.0",
        "expected a string, got int 1",
    ),
    "cmake-flags-second-int": (
        sub('cmake_flags: ["-DGGML_CPU=ON"]', 'cmake_flags:\n      - "-DGGML_CPU=ON"\n      - 2'),
        ("      - 2",),
        "backends.cpu.cmake_flags.1",
        "expected a string, got int 2",
    ),
    "cmake-flags-no-D": (
        sub('cmake_flags: ["-DGGML_CPU=ON"]', 'cmake_flags: ["GGML_CPU=ON"]'),
        ('    cmake_flags: ["GGML_CPU=ON"]',),
        "backends.cpu.cmake_flags.0",
        "'GGML_CPU=ON' is not a CMake definition (expected -DNAME=VALUE)",
    ),
    "cmake-flags-no-value": (
        sub('cmake_flags: ["-DGGML_CPU=ON"]', 'cmake_flags: ["-DGGML_CPU"]'),
        ('    cmake_flags: ["-DGGML_CPU"]',),
        "backends.cpu.cmake_flags.0",
        "is not a CMake definition",
    ),
    "timeout-zero": (
        sub("timeout: 300", "timeout: 0"),
        ("    timeout: 0",),
        "backends.cpu.timeout",
        "expected a positive number, got 0",
    ),
    "timeout-negative": (
        sub("timeout: 300", "timeout: -5"),
        ("    timeout: -5",),
        "backends.cpu.timeout",
        "expected a positive number, got -5",
    ),
    "timeout-string": (
        sub("timeout: 300", 'timeout: "300"'),
        ('    timeout: "300"',),
        "backends.cpu.timeout",
        "expected a number, got str '300'",
    ),
    "timeout-bool": (
        sub("timeout: 300", "timeout: true"),
        ("    timeout: true",),
        "backends.cpu.timeout",
        "expected a number, got bool True",
    ),
    "env-not-a-mapping": (
        sub("    timeout: 300\n", "    timeout: 300\n    env: [GGML_X=1]\n"),
        ("    env: [GGML_X=1]",),
        "backends.cpu.env",
        "got list",
    ),
    "env-value-not-a-string": (
        sub("    timeout: 300\n", "    timeout: 300\n    env:\n      GGML_X: 1\n"),
        ("      GGML_X: 1",),
        "backends.cpu.env.GGML_X",
        "expected a string, got int 1",
    ),
    "tools-not-a-list": (
        sub("    timeout: 300\n", "    timeout: 300\n    tools: glslc\n"),
        ("    tools: glslc",),
        "backends.cpu.tools",
        "got str",
    ),
    # profiles
    "profiles-empty": (
        sub(PROFILES_SECTION, "profiles: {}\n"),
        ("profiles: {}",),
        "profiles",
        "must not be empty",
    ),
    "profile-unknown-target": (
        sub("targets: [llama.cpp, ggml]", "targets: [llama.cpp, gml]"),
        ("    targets: [llama.cpp, gml]",),
        "profiles.default.targets",
        "unknown target 'gml'; did you mean 'ggml'?",
    ),
    "profile-unknown-target-block-list": (
        sub(
            "targets: [llama.cpp, ggml]",
            "targets:\n      - llama.cpp\n      - ggml\n      - whisper",
        ),
        ("      - whisper",),
        "profiles.default.targets",
        "unknown target 'whisper'",
    ),
    "profile-unknown-backend": (
        sub("backends: [cpu]", "backends: [cpu, vulkan]"),
        ("    backends: [cpu, vulkan]",),
        "profiles.default.backends",
        "unknown backend 'vulkan'",
    ),
    "profile-misspelt-backend": (
        sub("backends: [cpu]", "backends:\n      - cpuu"),
        ("      - cpuu",),
        "profiles.default.backends",
        "unknown backend 'cpuu'; did you mean 'cpu'?",
    ),
    "profile-empty-targets": (
        sub("targets: [llama.cpp, ggml]", "targets: []"),
        ("    targets: []",),
        "profiles.default.targets",
        "must not be empty",
    ),
    "profile-empty-backends": (
        sub("backends: [cpu]", "backends: []"),
        ("    backends: []",),
        "profiles.default.backends",
        "must not be empty",
    ),
    "profile-duplicate-target": (
        sub("targets: [llama.cpp, ggml]", "targets: [ggml, ggml]"),
        ("    targets: [ggml, ggml]",),
        "profiles.default.targets",
        "non-unique",
    ),
    "profile-missing-backends": (
        sub("    backends: [cpu]\n", ""),
        ("  default:",),
        "profiles.default",
        "missing required key 'backends'",
    ),
    "profile-unknown-key": (
        sub("    backends: [cpu]\n", "    backend: [cpu]\n"),
        ("    backend: [cpu]",),
        "profiles.default.backend",
        "did you mean 'backends'?",
    ),
    "profile-not-a-mapping": (
        sub(
            "  default:\n    targets: [llama.cpp, ggml]\n    backends: [cpu]\n",
            "  default: [llama.cpp, cpu]\n",
        ),
        ("  default: [llama.cpp, cpu]",),
        "profiles.default",
        "got list",
    ),
    "missing-default-profile": (
        sub("  default:\n", "  full:\n"),
        ("profiles:",),
        "profiles",
        "missing required profile 'default'",
    ),
}


def _params():
    for case_id, spec in _CASES.items():
        text, line, key, phrase = spec[:4]
        marks = spec[4:] if len(spec) > 4 else ()
        yield pytest.param(text, line, key, phrase, id=case_id, marks=marks)


@pytest.mark.parametrize("text, line, key, phrase", _params())
def test_malformed_matrix(tmp_path, text, line, key, phrase):
    path = _write(tmp_path, text)
    expected_line = line if isinstance(line, int) else line_of(text, *line)
    with pytest.raises(ConfigError) as e:
        load_matrix(path)
    msg = str(e.value)
    assert "\n" not in msg and "\r" not in msg, msg
    assert e.value.exit_code == ExitCode.CONFIG
    assert msg.startswith(f"{path}:{expected_line}: "), msg
    if key is not None:
        assert msg.startswith(f"{path}:{expected_line}: {key}: "), msg
    assert phrase in msg, msg


def test_at_least_thirty_malformed_cases():
    assert len(_CASES) >= 30


def test_first_error_by_line_is_reported(tmp_path):
    text = sub('version: "0.3.36"', "version: 1.0")
    text = sub("timeout: 300", "timeout: 0", text)
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_matrix(path)
    assert str(e.value).startswith(
        f"{path}:{line_of(text, '      version: 1.0')}: targets.llama.cpp.source.version: "
    )


def test_missing_file(tmp_path):
    path = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError) as e:
        load_matrix(path)
    assert str(e.value) == f"{path}: no such file (pass --matrix PATH)"


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(BASE.replace("description: ggml", "description: \xe9ggml").encode("latin-1"))
    with pytest.raises(ConfigError) as e:
        load_matrix(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:18: not UTF-8 text") and "\n" not in msg


def test_a_directory(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_matrix(tmp_path)
    assert str(e.value).startswith(f"{tmp_path}: a folder, not a regular matrix file")


def test_str_path_accepted(tmp_path):
    m = load_matrix(str(_write(tmp_path, BASE)))
    assert m.path == tmp_path / "matrix.yaml"


# ---- Matrix.cells ----

CELLS_BASE = (
    sub(CPU_BACKEND, CPU_BACKEND + '  vulkan:\n    cmake_flags: ["-DGGML_VULKAN=ON"]\n')
    + "  gpu:\n    targets: [ggml]\n    backends: [vulkan, cpu]\n"
)


@pytest.fixture
def matrix(tmp_path) -> Matrix:
    return load_matrix(_write(tmp_path, CELLS_BASE))


def _names(cells):
    return [(t.name, b.name) for t, b in cells]


def test_cells_default_profile(matrix):
    assert _names(matrix.cells()) == [("llama.cpp", "cpu"), ("ggml", "cpu")]


def test_cells_other_profile(matrix):
    assert _names(matrix.cells("gpu")) == [("ggml", "vulkan"), ("ggml", "cpu")]


def test_cells_narrowed(matrix):
    assert _names(matrix.cells(targets=["ggml"])) == [("ggml", "cpu")]
    assert _names(matrix.cells(backends=["vulkan"])) == [
        ("llama.cpp", "vulkan"),
        ("ggml", "vulkan"),
    ]
    assert _names(matrix.cells("gpu", targets=["llama.cpp"], backends=["cpu"])) == [
        ("llama.cpp", "cpu")
    ]
    assert _names(matrix.cells(targets=[], backends=[])) == [("llama.cpp", "cpu"), ("ggml", "cpu")]


def test_cells_return_the_resolved_objects(matrix):
    ((t, b),) = matrix.cells(targets=["ggml"])
    assert t is matrix.targets["ggml"] and b is matrix.backends["cpu"]


@pytest.mark.parametrize(
    "kwargs, phrase",
    [
        ({"profile": "defualt"}, "unknown profile 'defualt'; did you mean 'default'?"),
        ({"profile": "nightly"}, "unknown profile 'nightly'"),
        (
            {"targets": ["ggm"]},
            "unknown target 'ggm'; did you mean 'ggml'? (targets: llama.cpp, ggml)",
        ),
        ({"targets": ["ggml", "llama"]}, "unknown target 'llama'; did you mean 'llama.cpp'?"),
        ({"targets": ["whisper.cpp"]}, "unknown target 'whisper.cpp'"),
        (
            {"backends": ["vulkn"]},
            "unknown backend 'vulkn'; did you mean 'vulkan'? (backends: cpu, vulkan)",
        ),
        ({"backends": ["cuda"]}, "unknown backend 'cuda'"),
    ],
)
def test_cells_unknown_names(matrix, kwargs, phrase):
    with pytest.raises(ConfigError) as e:
        matrix.cells(**kwargs)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{matrix.path}: ")
    assert phrase in msg, msg


def test_target_and_backend_lookup(matrix):
    assert matrix.target("ggml") is matrix.targets["ggml"]
    assert matrix.backend("vulkan") is matrix.backends["vulkan"]
    with pytest.raises(ConfigError, match=r"unknown target 'ggm'; did you mean 'ggml'\?"):
        matrix.target("ggm")
    with pytest.raises(ConfigError, match=r"unknown backend 'cpuu'; did you mean 'cpu'\?"):
        matrix.backend("cpuu")


def test_each_source_kind_owns_its_model_and_the_matrix_schema_composes_them():
    import sys

    from orchestrator.config import Target, schema
    from orchestrator.config_records import Source

    s = schema()
    source = s["$defs"]["Target"]["properties"]["source"]
    assert source["discriminator"]["propertyName"] == "kind"
    models = Target.model_fields["source"].annotation.__args__
    assert [m.model_fields["kind"].annotation.__args__[0] for m in models] == [
        "pypi-sdist",
        "git",
        "local",
        "tarball",
    ]
    for model, one in zip(models, source["oneOf"], strict=True):
        module = sys.modules[model.__module__]  # the kind's model lives with the kind's snapshot
        assert issubclass(model, Source) and module.__name__.startswith("orchestrator.sources.")
        assert callable(module.snapshot)
        assert one["$ref"] == f"#/$defs/{model.__name__}"
        kind = s["$defs"][model.__name__]
        assert (
            kind["properties"]["kind"]["const"] == model.model_fields["kind"].annotation.__args__[0]
        )
        assert "kind" in kind["required"] and kind["additionalProperties"] is False


def test_the_source_registry_names_each_kind_of_the_matrix_once():
    """sources.KINDS maps each `kind:` to its model and its snapshot function (no lookup by
    module name): the same kinds, in the same order, as the matrix's union of options."""
    from orchestrator import sources
    from orchestrator.config import Target

    models = Target.model_fields["source"].annotation.__args__
    assert [k.model for k in sources.KINDS.values()] == list(models)
    for name, kind in sources.KINDS.items():
        assert kind.model.model_fields["kind"].annotation.__args__ == (name,)
        assert kind.snapshot.__module__ == kind.model.__module__
        assert kind.snapshot.__name__ == "snapshot"


# ---- the records: JSON and the published schema; hostile values ----


@pytest.mark.parametrize("which", ["real", "base", "every-key"])
def test_the_matrix_goes_through_json_and_its_schema(tmp_path, which):
    import json

    import jsonschema
    import yaml

    from orchestrator.config import schema

    every_key = sub(
        CPU_BACKEND,
        CPU_BACKEND + '    env: {GGML_X: "1"}\n    tools: [cc]\n    runs_on: [a, "b, c"]\n',
    )
    # (`ci: {repository: ...}` is gone: a repository variable opts in to the schedules now)
    every_key = sub(
        "    layout: ggml\n",
        "    layout: ggml\n    prefix: vendor/ggml\n    upstream: {repo: a/b, submit: api}\n",
        every_key,
    )
    path = (
        ROOT / "matrix.yaml"
        if which == "real"
        else _write(tmp_path, BASE if which == "base" else every_key)
    )
    m = load_matrix(path)
    text = m.model_dump_json(exclude_unset=True)
    # what the file says, as the file says it
    assert json.loads(text) == yaml.safe_load(path.read_text())
    jsonschema.validate(json.loads(text), schema())
    again = Matrix.model_validate_json(text).located(m.path, m.lines)
    assert again == m
    assert [(t.name, t.source.key, t.source.base_dir) for t in again.targets.values()] == [
        (t.name, f"targets.{t.name}.source", path.parent) for t in m.targets.values()
    ]


@pytest.mark.parametrize(
    "bad",
    [
        {"targets": {}},
        {"extra": 1},
        {"backends": {"opencl": {}}},
        {"targets": {"a b": {}}},
        {"profiles": {"default": {"targets": [], "backends": []}}},
    ],
)
def test_the_published_schema_refuses_what_the_loader_refuses(bad):
    import jsonschema
    import yaml

    from orchestrator.config import schema

    data = {**yaml.safe_load(BASE), **bad}
    assert list(jsonschema.Draft202012Validator(schema()).iter_errors(data))


_HOSTILE = {
    "a-key-named-like-the-kind": (
        sub(
            "      subdirectory: vendor/ggml\n",
            "      subdirectory: vendor/ggml\n      pypi-sdist: 1\n",
        ),
        "      pypi-sdist: 1",
        "targets.ggml.source.pypi-sdist: unknown key (allowed: kind, package, version, "
        "sha256, subdirectory)",
    ),
    "runs-on-empty-list": (
        sub("    timeout: 300\n", "    timeout: 300\n    runs_on: []\n"),
        "    runs_on: []",
        "backends.cpu.runs_on: must not be empty",
    ),
    "runs-on-twice": (
        sub("    timeout: 300\n", "    timeout: 300\n    runs_on: [a, a]\n"),
        "    runs_on: [a, a]",
        "backends.cpu.runs_on: ['a', 'a'] has non-unique elements",
    ),
    "runs-on-a-number": (
        sub("    timeout: 300\n", "    timeout: 300\n    runs_on: 5\n"),
        "    runs_on: 5",
        "backends.cpu.runs_on: expected a string, got int 5",
    ),
    "env-value-a-list": (
        sub("    timeout: 300\n", "    timeout: 300\n    env: {A: [1]}\n"),
        "    env: {A: [1]}",
        "backends.cpu.env.A: expected a string, got list [1]",
    ),
    "profile-extra-key": (
        sub("    backends: [cpu]\n", "    backends: [cpu]\n    nightly: true\n"),
        "    nightly: true",
        "profiles.default.nightly: unknown key (allowed: targets, backends)",
    ),
    "description-a-date": (
        sub("description: ggml as vendored by ggml-python 0.0.45", "description: 2024-01-01"),
        "    description: 2024-01-01",
        "targets.ggml.description: expected a string, got date datetime.date(2024, 1, 1)",
    ),
    "timeout-huge-int": (
        sub("timeout: 300", "timeout: " + "9" * 400),
        "    timeout: " + "9" * 400,
        "backends.cpu.timeout: ",
    ),
    "ci-a-list": (BASE + "ci: [me/x]\n", "ci: [me/x]", "ci: expected an object, got list ['me/x']"),
    "upstream-submit-a-bool": (
        sub("    layout: ggml\n", "    layout: ggml\n    upstream: {submit: yes}\n"),
        "    upstream: {submit: yes}",
        "targets.ggml.upstream.submit: True is not one of manual, api, none",
    ),
    "source-kind-a-number": (
        sub("kind: pypi-sdist\n      package: ggml-python", "kind: 7\n      package: ggml-python"),
        "      kind: 7",
        "targets.ggml.source.kind: 7 is not one of pypi-sdist, git, local, tarball",
    ),
}


@pytest.mark.parametrize("text, line, message", _HOSTILE.values(), ids=list(_HOSTILE))
def test_hostile_values_are_one_line_with_file_line_and_key(tmp_path, text, line, message):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_matrix(path)
    assert str(e.value).startswith(f"{path}:{line_of(text, line)}: {message}"), str(e.value)
    assert "\n" not in str(e.value)


_VALUES = [
    None,
    True,
    0,
    -1,
    1.5,
    1e308,
    "",
    "x" * 300,
    "../x",
    "-Dx",
    [],
    [1],
    {},
    {"a": 1},
    ["a", "a"],
]


def _keys(data, path=()):
    yield path
    if isinstance(data, dict):
        for k, v in data.items():
            yield from _keys(v, path + (k,))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _keys(v, path + (i,))


def _replaced(data, path, value):
    if not path:
        return value
    out = dict(data) if isinstance(data, dict) else list(data)
    out[path[0]] = _replaced(data[path[0]], path[1:], value)
    return out


@given(st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_value_anywhere_loads_or_is_one_line(tmp_path, data):
    import yaml

    base = yaml.safe_load(BASE)
    path = data.draw(st.sampled_from(list(_keys(base))[1:]))
    value = data.draw(st.sampled_from(_VALUES))
    f = _write(tmp_path, yaml.safe_dump(_replaced(base, path, value), sort_keys=False))
    try:
        load_matrix(f)
    except ConfigError as e:
        assert str(e).startswith(f"{f}:") and "\n" not in str(e), str(e)
