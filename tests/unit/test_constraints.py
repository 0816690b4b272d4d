"""constraints.txt pins one version of each package on every Python that requires-python claims
(environment markers pick the 3.10 versions where the tested ones have no 3.10 release). Whether
those versions install is checked where a Python 3.10 exists: the project CI's pythons job."""

import re
from collections import Counter

import pytest
from packaging.requirements import Requirement

from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit


def _requirements() -> list[Requirement]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    return [Requirement(ln) for ln in lines if ln.strip() and not ln.startswith("#")]


def _oldest_python() -> tuple[int, int]:
    m = re.search(r'requires-python = ">=(\d+)\.(\d+)"', (ROOT / "pyproject.toml").read_text())
    return int(m[1]), int(m[2])


@pytest.mark.parametrize("minor", [0, 1, 2, 3, 4])
def test_one_exact_pin_per_package_on_every_claimed_python(minor):
    major, oldest = _oldest_python()
    version = f"{major}.{oldest + minor}"
    env = {"python_version": version, "python_full_version": version + ".0"}
    active = [r for r in _requirements() if r.marker is None or r.marker.evaluate(env)]
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in active)
    dupes = [
        n for n, c in Counter(r.name.lower().replace("_", "-") for r in active).items() if c > 1
    ]
    assert not dupes, f"pinned twice on Python {version}: {dupes}"
    names = {r.name.lower() for r in active}
    assert {"numpy", "contourpy", "zizmor", "requests", "urllib3"} <= names


def test_the_versions_without_a_310_release_have_a_310_pin():
    # numpy 2.3+ and contourpy 1.3.3 need Python 3.11 (measured: pip on 3.10.13 finds none)
    on_310 = {
        r.name.lower(): str(r.specifier)
        for r in _requirements()
        if r.marker is not None and r.marker.evaluate({"python_version": "3.10"})
    }
    assert on_310["numpy"].startswith("==2.2.") and on_310["contourpy"] == "==1.3.2"
