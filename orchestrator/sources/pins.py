"""Pins: a git target's branch, tag or HEAD replaced by one commit, so every job of a CI run (each
leg, the aggregate's bundle, the drift report) works on the same upstream commit even when the
branch moves during the run.

`resolve(matrix, names)` asks each git remote once what its ref names now (`git ls-remote`:
nothing is fetched); `pinned(matrix, pins)` is the matrix with those refs replaced. A pins file is
what `ggml-patch resolve-refs` writes:
    {"version": 1, "pins": {TARGET: {"commit": SHA, "ref": "master", "remote_ref": "refs/heads/master", "url": URL}},
     "unreachable": {TARGET: {"url": URL, "ref": "master", "reason": "..."}}}
(a bare SHA is accepted for a pin too); `--pin TARGET=COMMIT` gives one by hand. Every command
takes `--pins FILE` and `--pin`. A target the plan could not reach is recorded, not fatal: its
legs report `source unavailable` at once (no second try), the rest of the run goes on.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from .. import untrusted
from ..config import Matrix
from ..errors import ConfigError
from ..vcs import mirror
from ..vcs.runner import GitError
from . import SourceUnreachable
from .git import Pinned

_FULL_SHA = re.compile(r"^[0-9a-f]{40}$")
VERSION = 1


# ---------------------------------------------------------------- reading pins


def parse_pin(text: str) -> tuple[str, dict]:
    """--pin TARGET=COMMIT."""
    target, sep, commit = text.partition("=")
    if not sep or not target or not _FULL_SHA.match(commit):
        raise ConfigError(f"--pin {text!r}: expected TARGET=COMMIT with a full 40-hex commit id")
    return target, {"commit": commit}


def read_pins_file(path: Path) -> dict[str, dict]:

    if not Path(path).exists():
        raise ConfigError(f"{path}: no such pins file (write one with `ggml-patch resolve-refs --out FILE`)")
    data = untrusted.load_json(path, "pins")
    pins = data.get("pins") if isinstance(data, dict) else None
    if not isinstance(pins, dict):
        raise ConfigError(f'{path}: not a pins file: expected {{"pins": {{TARGET: {{"commit": SHA}}}}}}')
    out = {}
    for target, pin in pins.items():
        pin = {"commit": pin} if isinstance(pin, str) else pin
        if not isinstance(pin, dict) or not _FULL_SHA.match(str(pin.get("commit", ""))):
            raise ConfigError(f'{path}: pins.{target}: expected a full 40-hex commit id ("commit")')
        out[str(target)] = pin
    gone = data.get("unreachable", {})
    if not isinstance(gone, dict) or not all(isinstance(v, dict) and "reason" in v for v in gone.values()):
        raise ConfigError(f'{path}: unreachable: expected {{TARGET: {{"reason": TEXT}}}}')
    for target, why in gone.items():
        out.setdefault(str(target), {"unreachable": str(why["reason"])})
    return out


def collect(pins_file: Optional[str], pin_args: Iterable[str]) -> dict[str, dict]:
    """--pins FILE, then each --pin (which wins)."""
    pins = read_pins_file(Path(pins_file)) if pins_file else {}
    for text in pin_args:
        target, pin = parse_pin(text)
        pins[target] = pin
    return pins


def pinned(matrix: Matrix, pins: dict[str, dict]) -> Matrix:
    """The matrix with each pinned git target's ref replaced by its commit (the ref matrix.yaml
    names is kept for descriptions and provenance)."""
    if not pins:
        return matrix
    targets = dict(matrix.targets)
    for name, pin in pins.items():
        t = matrix.target(name)  # one-line error for an unknown target
        if t.source.kind != "git":
            raise ConfigError(
                f"pin for {name!r}: its source is {t.source.kind}, already pinned by matrix.yaml; "
                "only git sources take a pin"
            )
        o = t.source.options
        if "unreachable" in pin:  # the plan could not reach it: its cells report that, without a retry
            o["unreachable"] = str(pin["unreachable"])
        else:
            o.update(ref=str(pin["commit"]), pinned_from=o["ref"], pinned_ref=str(pin.get("remote_ref") or ""))
        source = Pinned(**o)
        targets[name] = t.model_copy(update={"source": source.at(t.source.key, t.source.base_dir)})
    return matrix.model_copy(update={"targets": targets})


# ---------------------------------------------------------------- resolving refs


def git_targets(matrix: Matrix, profiles: Iterable[str], names: Iterable[str] = ()) -> list[str]:
    """The git targets of the given profiles (or just `names`), each once, in matrix.yaml's order."""
    wanted = list(names)
    for n in wanted:
        matrix.target(n)
    chosen: dict[str, None] = {}
    for p in profiles:
        for t, _ in matrix.cells(p):
            chosen.setdefault(t.name, None)
    order = [t for t in matrix.targets if (t in wanted if wanted else t in chosen)]
    return [t for t in order if matrix.targets[t].source.kind == "git"]


def resolve(matrix: Matrix, names: list[str]) -> dict[str, dict]:
    """target -> {commit, ref, remote_ref, url}: what each git ref names now. Raises for the
    first target that cannot be resolved (resolve_reachable records them instead)."""
    pins, gone = resolve_reachable(matrix, names)
    if gone:
        raise SourceUnreachable(next(iter(gone.values()))["reason"])
    return pins


def resolve_reachable(matrix: Matrix, names: list[str]) -> tuple[dict[str, dict], dict[str, dict]]:
    """(pins of the targets that resolved, {target: {url, ref, reason}} of those that did not: a
    remote down, gone or private, or a ref it no longer has)."""
    out, gone = {}, {}
    for name in names:
        src = matrix.target(name).source
        url, ref = str(src["url"]), str(src["ref"])
        try:
            commit, remote_ref = ls_remote(url, ref, f"{src.key}.ref")
        except (SourceUnreachable, ConfigError) as e:
            gone[name] = {"url": url, "ref": ref, "reason": str(e)}
            continue
        out[name] = {"commit": commit, "ref": ref, "remote_ref": remote_ref, "url": url}
    return out, gone


def ls_remote(url: str, ref: str, key: str) -> tuple[str, str]:
    """(commit, full remote ref) that `ref` names at `url`; a full commit id is itself."""
    if _FULL_SHA.match(ref):
        return ref, ref
    if ref == "HEAD":
        lines = _ls_remote(["--symref"], [url, "HEAD"], url, key)
        target = next(
            (ln[len("ref: ") : -len("\tHEAD")] for ln in lines if ln.startswith("ref: ") and ln.endswith("\tHEAD")),
            None,
        )
        sha = next((ln.split("\t")[0] for ln in lines if ln.endswith("\tHEAD") and not ln.startswith("ref: ")), None)
        if not sha:
            raise ConfigError(f"{key}: {url} has no default branch (HEAD)")
        return sha, target or "HEAD"
    candidates = [ref] if ref.startswith("refs/") else [f"refs/heads/{ref}", f"refs/tags/{ref}"]
    found = {}
    peeled = [f"{c}^{{}}" for c in candidates if c.startswith("refs/tags/")]  # an annotated tag's commit
    for ln in _ls_remote([], [url, *candidates, *peeled], url, key):
        sha, _, name = ln.partition("\t")
        found[name] = sha
    for c in candidates:
        if c in found:
            return found.get(c + "^{}", found[c]), c
    raise ConfigError(f"{key}: {ref!r} is not a branch, tag or full commit id at {url}")


def _ls_remote(options: list[str], args: list[str], url: str, key: str) -> list[str]:

    try:  # no repository needed: git ls-remote talks to the remote only
        out = mirror.ls_remote(args[0], args[1:], symref="--symref" in options)
    except GitError as e:
        raise SourceUnreachable(f"{key.rsplit('.', 1)[0]}.url: {url} is unreachable: {e.reason}") from None
    return [ln for ln in out.splitlines() if ln.strip()]


def pins_json(pins: dict[str, dict], unreachable: Optional[dict[str, dict]] = None) -> dict:
    return {"version": VERSION, "pins": pins, **({"unreachable": unreachable} if unreachable else {})}
