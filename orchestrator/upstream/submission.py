"""How a bundle may be submitted, from the policy its manifest records: through the API (`api`,
the user's own fork), by the contributor's own hands (`manual`: the tool prints the exact steps),
or not at all (`none`: a target verified through another's sync). Pure."""

from __future__ import annotations

from pathlib import Path
from typing import Optional
from urllib.parse import quote, urlsplit

from ..errors import ConfigError
from ..redact import redact, shell_line
from ..vcs import workrepo
from .manifest import Manifest, Policy, Role


def policy_of(manifest: Manifest, where: str) -> Policy:
    if manifest.policy is None:
        raise ConfigError(
            f"{where}: no policy recorded (made by an older ggml-patch); re-run `ggml-patch bundle`"
        )
    return manifest.policy


def role_of(policy: Policy) -> Role:
    role = policy.role.value
    return role if isinstance(role, Role) else Role(kind="verify-only", text="submit: none")


def web_url(api_url: str) -> str:
    """https://api.github.com -> https://github.com;
    https://HOST/api/v3 (Enterprise) -> https://HOST."""
    parts = urlsplit(api_url.rstrip("/"))
    if parts.netloc != "api.github.com" and parts.path.endswith("/api/v3"):
        return f"{parts.scheme}://{parts.netloc}{parts.path.removesuffix('/api/v3')}"
    return "https://github.com"


def manual_steps(
    policy: Policy,
    *,
    repo: str,
    branch: str,
    base: str,
    remote: str,
    api_url: str,
    patches: tuple[Path, ...],
    bundle: Path,
    workdir: str,
    onto: str,
    fetch: bool,
    owner: Optional[str],
) -> list[str]:
    """What the contributor runs for `pr`, in order: the branch made from the bundle, pushed to
    their fork (`remote` redacted), and the compare page where they open the pull request
    themselves."""
    paths = [str(p.resolve()) for p in patches]  # `git -C` elsewhere: absolute paths
    head, where = f"{owner or 'OWNER'}:{branch}", bundle.resolve()
    steps = workrepo.by_hand(workdir, redact(remote), onto, paths, branch, fetch)
    forbidden = policy.rules.get("automated_submission_forbidden")
    why = (forbidden.cited() if forbidden else "") or policy.submit.cited()
    out = [
        f"manual submission: {repo} takes its pull requests from people, not tools (submit: manual"
        + (f"; {why}" if why else "")
        + "): nothing was pushed or sent.",
        "Run these yourself:",
        "",
        *(f"  {shell_line(argv)}" for argv in steps),
        "",
        "then open the pull request in your browser:",
        "",
        f"  {web_url(api_url)}/{repo}/compare/{quote(base, safe='')}..."
        f"{quote(head, safe=':/')}?expand=1",
        "",
        f"title: {where}/PR_TITLE",
        f"description: {where}/PR_BODY.md",
        f"the issue to open first: {where}/ISSUE.md",
    ]
    if not owner:
        out.append("(OWNER: your GitHub user; --head-owner fills it in)")
    return out


def no_pull_request(policy: Policy, target: str) -> list[str]:
    role, cited = role_of(policy), policy.role.cited()
    goes = role.changes_go_to
    out = [f"{target} takes no pull request: {role.text}" + (f" ({cited})" if cited else "") + "."]
    if goes:
        out.append(
            f"Its changes go to {goes}: submit the bundle of the target whose upstream.repo "
            f"is {goes}."
        )
    return out
