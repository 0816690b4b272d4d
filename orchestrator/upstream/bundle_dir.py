"""A bundle's folder: manifest.json's data, the folder written whole (only where the tool may
write) and read back, every file checked against the manifest."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .. import outdir, untrusted
from ..errors import ConfigError
from ..model.results import Results
from ..redact import redact_data
from .manifest import Manifest, Verification, read_manifest

MANIFEST = "manifest.json"


def manifest(
    *,
    target: str,
    layout: str,
    results: Results,
    results_sha256: str,
    results_path: str,
    source: dict,
    patched_commit: str,
    patches: list[tuple[str, str]],
    files: dict[str, str],
    verification: Optional[Verification],
    toolchain: dict,
    warnings: list[str],
    **more: Any,
) -> dict[str, Any]:
    """manifest.json's data (upstream/manifest.py), redacted; `more`: the policy's keys and the
    rest."""
    data = {
        "schema_version": 2,
        "tool": "ggml-patch",
        "target": target,
        "layout": layout,
        "base": {
            "snapshot_commit": source.get("base_commit"),
            "upstream_commit": source.get("upstream_commit"),
            "description": source.get("description"),
            "source": source or None,
        },
        "patched_commit": patched_commit,
        "series": {
            # the same digest as Series.sha256: each patch's name and text
            "sha256": hashlib.sha256(
                b"".join(f"{n}\0{t}\0".encode() for n, t in patches)
            ).hexdigest(),
            "results_series_sha256": results.series.sha256,
            "patches": [name for name, _ in patches],
        },
        "results": {
            "path": results_path,
            "sha256": results_sha256,
            "started_at": results.started_at,
            "exit_code": results.exit_code,
        },
        "incomplete": bool(warnings),
        "warnings": warnings,
        "verification": verification.to_json() if verification else None,
        "toolchain": toolchain,
        "files": files,
        **more,
    }
    return Manifest.model_validate(redact_data(data)).to_json()


@dataclass(frozen=True)
class Bundle:
    path: Path
    manifest: Manifest
    title: str
    body: str
    patch_files: tuple[Path, ...]

    @property
    def target(self) -> str:
        return self.manifest.target


def read_bundle(directory: Path) -> Bundle:
    """A bundle directory, checked against its manifest: every file present, unchanged."""
    directory = Path(directory)
    mpath = directory / MANIFEST
    if not mpath.exists() and not mpath.is_symlink():
        raise ConfigError(
            f"{mpath}: missing; --bundle must name one target's directory made by "
            "`ggml-patch bundle`"
        )
    # untrusted: every field checked before any is used
    man = read_manifest(untrusted.load_json(mpath, "manifest", root=directory), mpath)
    files = man.files
    for name, digest in files.items():
        f = untrusted.name_under(directory, name, f"{mpath}: files")
        if Path(name).name != name or not f.is_file():
            raise ConfigError(f"{f}: listed in {MANIFEST} but missing; re-run `ggml-patch bundle`")
        kind = "patch" if name.endswith(".patch") else "document"
        if hashlib.sha256(untrusted.read_bytes(f, kind, root=directory)).hexdigest() != digest:
            raise ConfigError(
                f"{f}: changed since the bundle was made (sha256 differs from {MANIFEST}); "
                "re-run `ggml-patch bundle`"
            )
    patches = tuple(sorted(directory / n for n in files if n.endswith(".patch")))
    if not patches:
        raise ConfigError(f"{mpath}: the bundle lacks patches")
    if man.takes_pull_request and ("PR_TITLE" not in files or "PR_BODY.md" not in files):
        raise ConfigError(f"{mpath}: the bundle lacks PR_TITLE or PR_BODY.md")
    read = lambda n: (directory / n).read_text(encoding="utf-8") if n in files else ""  # noqa: E731
    return Bundle(directory, man, read("PR_TITLE").strip(), read("PR_BODY.md"), patches)


def _write_dir(dest: Path, files: dict[str, str | bytes]) -> None:
    """Replace `dest` whole (no earlier patch is left beside the new ones), only when it is an
    earlier bundle or empty, through a staging folder of its own (a user's `.NAME.partial/` is
    never touched)."""
    # an empty folder, or a bundle the tool wrote before
    earlier = dest.is_dir() and (not any(dest.iterdir()) or outdir.made_bundle(dest))
    if dest.is_symlink() or (dest.exists() and not earlier):
        raise ConfigError(
            f"{dest}: holds files ggml-patch did not write; move them away or name another --out"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.partial-", dir=dest.parent))
    try:
        for name, data in files.items():
            untrusted.name_under(staging, name, "bundle file").write_bytes(_bytes(data))
        if dest.exists():
            shutil.rmtree(dest)
        staging.rename(dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _bytes(data: str | bytes) -> bytes:
    return data if isinstance(data, bytes) else data.encode("utf-8")
