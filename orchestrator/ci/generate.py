"""Every file `ggml-patch ci-workflow` writes, with the action pins the committed workflows carry.

Beside a workflow in a `.github/workflows/` folder (the default): the drift and project-CI
workflows, the self-hosted legs' workflow (where matrix.yaml names a self-hosted runner),
`.github/actionlint.yaml` (matrix.yaml's self-hosted runner labels) and
`.github/ggml-patch-cells.json` (the noxfile's cell sessions). A workflow written elsewhere
(--output) stands alone.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..errors import ConfigError
from . import common, drift_workflow, project_workflow
from .actions import Pins, current_pins
from .workflow import (
    DEFAULT_PATH,
    SELF_HOSTED_PATH,
    actionlint_config,
    nox_cells_json,
    self_hosted_workflow,
    workflow_yaml,
)

CELLS_JSON = ".github/ggml-patch-cells.json"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (FileNotFoundError, IsADirectoryError, UnicodeDecodeError):
        return ""


def _git_root(start: Path) -> Optional[Path]:
    """The nearest folder at or above `start` holding .git (a folder, or a worktree's file)."""
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return None


def refuse_subdirectory(matrix, github: Path) -> None:
    """The generated jobs run at the repository's root (`pip install .`, constraints.txt,
    matrix.yaml, orchestrator/scripts/), and GitHub reads workflows from the root's .github/
    only: a tool vendored in a subdirectory is refused in one line, before anything is written."""
    home = matrix.path.parent.resolve()
    root = _git_root(home) or home
    if github.resolve().parent != home or root != home:
        raise ConfigError(
            f"{matrix.path}: the generated workflows run from the root of the repository that "
            f"holds .github/ ({root}), and need matrix.yaml there: vendoring ggml-patch in a "
            "subdirectory is not supported (keep it at the root of a repository of its own)"
        )


def generated(
    matrix, output: Optional[Path] = None, profiles: Optional[Iterable[str]] = None
) -> dict[Path, str]:
    profiles = list(profiles) if profiles else None
    main = Path(output) if output else matrix.path.parent / DEFAULT_PATH
    workflows: dict[Path, Callable[[Pins], str]] = {
        main: lambda pins: workflow_yaml(matrix, profiles, pins)
    }
    beside = main.parent.name == "workflows" and main.parent.parent.name == ".github"
    if beside:
        refuse_subdirectory(matrix, main.parent.parent)
    for other in (drift_workflow, project_workflow) if beside else ():
        workflows[main.parent / Path(other.PATH).name] = partial(other.workflow_yaml, matrix)
    if beside and self_hosted_workflow(matrix, profiles) is not None:
        path = main.parent / Path(SELF_HOSTED_PATH).name
        workflows[path] = lambda pins: common.dump(
            self_hosted_workflow(matrix, profiles, pins), pins
        )
    pins = current_pins(_read(p) for p in workflows)  # what Dependabot bumped stays
    files = {path: make(pins) for path, make in workflows.items()}
    if beside:
        github = main.parent.parent
        files[github / "actionlint.yaml"] = actionlint_config(matrix)
        files[github / Path(CELLS_JSON).name] = nox_cells_json(matrix)
    return files


def orphans(matrix, output: Optional[Path] = None) -> list[Path]:
    """Generated files that must not exist any more: the self-hosted legs' workflow once
    matrix.yaml names no self-hosted runner (left, it would queue jobs for runners now gone)."""
    main = Path(output) if output else matrix.path.parent / DEFAULT_PATH
    if main.parent.name != "workflows" or main.parent.parent.name != ".github":
        return []
    path = main.parent / Path(SELF_HOSTED_PATH).name
    if path.is_file() and self_hosted_workflow(matrix) is None:
        return [path]
    return []
