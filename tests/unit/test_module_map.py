"""README's module map matches orchestrator/: every package has its row, every package and module a
row names exists, and every module is named (a new one gets its line when it is added)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"
# a row: | `folder/` | text naming its modules as `name.py` |
ROW = re.compile(r"^\| `(?P<folder>[a-z_]+)/` \|(?P<text>.*)\|$")
MODULE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*\.py)`")


def module_map() -> dict[Path, set[str]]:
    """Each folder the map has a row for -> the module files that row names."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Module map\n", 1)[1].split("\n## ", 1)[0]
    named: dict[Path, set[str]] = {}
    for line in section.splitlines():
        row = ROW.match(line)
        if row is None:
            continue
        folder = row["folder"]
        path = PACKAGE if folder == "orchestrator" else PACKAGE / folder
        named[path] = set(MODULE.findall(row["text"]))
    return named


def packages() -> set[Path]:
    return {init.parent for init in PACKAGE.rglob("__init__.py")}


def test_every_package_has_a_row_and_every_row_is_a_package():
    named = set(module_map())
    unnamed = sorted(str(p.relative_to(ROOT)) for p in packages() - named)
    gone = sorted(str(p.relative_to(ROOT)) for p in named - packages())
    assert not unnamed, f"packages without a row in README's module map: {unnamed}"
    assert not gone, f"rows of README's module map for no package: {gone}"


def test_every_module_the_map_names_exists():
    missing = []
    for folder, modules in module_map().items():
        for name in sorted(modules):
            if not (folder / name).is_file():
                missing.append(str((folder / name).relative_to(ROOT)))
    assert not missing, f"README's module map names modules that do not exist: {missing}"


def test_every_module_is_named_in_its_row():
    named = module_map()
    unnamed = []
    for folder in sorted(packages()):
        for module in sorted(folder.glob("*.py")):
            if module.name != "__init__.py" and module.name not in named.get(folder, set()):
                unnamed.append(str(module.relative_to(ROOT)))
    assert not unnamed, f"modules README's module map does not name (add them): {unnamed}"
