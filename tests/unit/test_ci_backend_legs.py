"""A backend module owns its CI leg (backends/base.py: ci_leg): the generator (ci/workflow.py)
asks it and holds no table of backends, so a new backend's legs are honest by construction:
required on their runner (a skip fails the leg), their setup the module's, or refused in one
line where the runner can never run them."""

import ast
from pathlib import Path

import pytest

from orchestrator import backends
from orchestrator.backends.base import BackendModule, CiLeg, CiSetup, NoCiLeg, Runner
from orchestrator.ci import workflow as wf
from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError

from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit

RUNNERS = ["ubuntu-24.04", "macos-15", "windows-2025", "self-hosted, linux, gpu", "self-hosted"]


class Sycl(BackendModule):
    """A new backend as one would write it first: a name and its flags, nothing about CI."""

    name = "sycl"
    cmake_flags = ("-DGGML_SYCL=ON",)


FAKE_SETUP = CiSetup(
    name="fake-sdk",
    title="Fake SDK",
    run="bash scripts/setup-fake.sh\n",
    cache_title="Fake SDK download",
    cache_path="${{ runner.temp }}/fake",
    cache_key="fake-sdk-1",
)


class WithSetup(BackendModule):
    name = "cpu"  # stands in for the matrix's one backend below

    def ci_leg(self, runner: Runner) -> CiLeg:
        if not runner.linux:
            raise NoCiLeg("the fake SDK is Linux-only")
        return CiLeg(setup=FAKE_SETUP if runner.hosted else None)


class ClaimsBuildOnly(BackendModule):
    name = "npu"

    def ci_leg(self, runner: Runner) -> CiLeg:
        return CiLeg(build_only=True)  # without build_only_ok: it could not build there


@pytest.mark.parametrize("runs_on", RUNNERS)
def test_a_backend_that_says_nothing_about_ci_gets_legs_that_must_run_it(runs_on):
    facts, setup = wf.leg_facts(Sycl(), runs_on)
    assert facts == {"setup": "", "require-backend": "sycl", "build-only": False}
    assert setup is None


def test_build_only_needs_a_module_that_can_build_without_its_device():
    with pytest.raises(NoCiLeg, match="npu cannot be built without its device"):
        wf.leg_facts(ClaimsBuildOnly(), "ubuntu-24.04")


@pytest.mark.parametrize("name", backends.names())
@pytest.mark.parametrize("runs_on", RUNNERS)
def test_every_registered_backend_requires_itself_or_refuses_the_runner(name, runs_on):
    module = backends.get(name)
    try:
        facts, setup = wf.leg_facts(module, runs_on)
    except NoCiLeg as why:
        assert str(why) and "\n" not in str(why)
        return
    assert facts["require-backend"] == name
    assert facts["setup"] == (setup.name if setup else "")
    assert not facts["build-only"] or module.build_only_ok


def test_the_real_backends_on_hosted_runners():
    def facts(name, runs_on):
        return wf.leg_facts(backends.get(name), runs_on)[0]

    assert facts("vulkan", "ubuntu-24.04")["setup"] == "vulkan-lavapipe"
    assert facts("cuda", "ubuntu-24.04") == {
        "setup": "cuda-pypi",
        "require-backend": "cuda",
        "build-only": True,
    }
    assert facts("cuda", "self-hosted, linux, gpu")["build-only"] is False  # its GPU, for real
    assert facts("metal", "macos-15")["setup"] == ""
    for name, runs_on in (("metal", "ubuntu-24.04"), ("cuda", "macos-15"), ("vulkan", "macos-15")):
        with pytest.raises(NoCiLeg):
            wf.leg_facts(backends.get(name), runs_on)


# one target, one backend (owned by this test: the real matrix.yaml may grow)
MATRIX = """\
queue:
  path: patches
  layout: llama.cpp
native_tests: native_tests
targets:
  ggml:
    layout: ggml
    source:
      kind: pypi-sdist
      package: ggml-python
      version: "0.0.45"
      sha256: 10aac52075cf3c7ef2b00d6c35b1c23f7b018dbeff8ae8df67339b4be1166f05
      subdirectory: vendor/ggml
backends:
  cpu:
    timeout: 300
    runs_on: {runs_on}
profiles:
  default:
    targets: [ggml]
    backends: [cpu]
"""


def _matrix(tmp_path: Path, runs_on: str):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "matrix.yaml"
    path.write_text(MATRIX.format(runs_on=runs_on), encoding="utf-8")
    return load_matrix(path)


def test_a_module_s_setup_and_refusal_reach_the_workflow(tmp_path, monkeypatch):
    monkeypatch.setattr(wf, "backend_module", lambda name: WithSetup())
    matrix = _matrix(tmp_path, "ubuntu-24.04")
    cell = wf.workflow(matrix)["jobs"]["cell"]
    legs = cell["strategy"]["matrix"]["include"]
    assert legs and all(
        (leg["setup"], leg["require-backend"], leg["build-only"]) == ("fake-sdk", "cpu", False)
        for leg in legs
    )
    assert all("ci-setup" not in leg for leg in legs)  # the steps carry it, not the matrix
    names = [s["name"] for s in cell["steps"]]
    cache = cell["steps"][names.index("Fake SDK download")]
    setup = cell["steps"][names.index("Fake SDK")]
    assert names.index("Fake SDK download") < names.index("Fake SDK") < names.index("Run the cell")
    assert cache["if"] == setup["if"] == "matrix.setup == 'fake-sdk'"
    assert cache["with"] == {"path": "${{ runner.temp }}/fake", "key": "fake-sdk-1"}
    assert setup["run"] == FAKE_SETUP.run

    refused = _matrix(tmp_path / "mac", "macos-15")
    with pytest.raises(ConfigError) as err:
        wf.workflow(refused)
    line = next(
        i for i, text in enumerate(refused.path.read_text().splitlines(), 1) if "runs_on" in text
    )
    assert str(err.value) == (
        f"{refused.path}:{line}: backends.cpu.runs_on: 'macos-15': the fake SDK is Linux-only"
    )


def test_the_generator_holds_no_table_of_backends():
    """ci/workflow.py names no backend but cpu (the bundle reuses the cpu leg's build)."""
    tree = ast.parse((ROOT / "orchestrator" / "ci" / "workflow.py").read_text(encoding="utf-8"))
    named = {
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in backends.names()
    }
    assert named <= {"cpu"}, named
