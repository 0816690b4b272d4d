"""Writing a run's results: results.json (the record) and summary.md (for people)."""
from __future__ import annotations

import json
from pathlib import Path

_ICON = {"passed": "✅", "failed": "❌", "error": "💥", "skipped": "⏭️", "build-only": "🔨"}


def write_results(results: dict, directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "results.json"
    json_path.write_text(json.dumps(results, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    md_path = directory / "summary.md"
    md_path.write_text(summary_markdown(results), encoding="utf-8")
    return [json_path, md_path]


def _records(results: dict, cell: str) -> dict[str, dict]:
    return {r["variant"]: r for r in results["records"] if r["cell"] == cell}


def _test_cell(rec: dict | None, test: str) -> str:
    if not rec:
        return "—"
    if rec.get("status") == "build-failed":
        return "build failed"
    t = rec["tests"].get(test)
    if not t:
        return "—"
    rows = t.get("rows") or []
    ok = sum(1 for r in rows if r["status"] in ("OK", "SKIPPED"))
    counted = f" ({ok}/{len(rows)})" if rows else ""
    return f"{t['outcome']}{counted}"


def summary_markdown(results: dict) -> str:
    cells = results["cells"]
    good = sum(1 for c in cells if c["status"] == "passed")
    series = results["series"]
    out = [
        f"# ggml-patch matrix: {good}/{len(cells)} cells passed",
        "",
        f"Series: {len(series['patches'])} patches in the {series['layout']} layout "
        f"(sha256 `{series['sha256'][:16]}`), profile `{results['profile']}`, exit code {results['exit_code']}.",
        "",
        "| cell | status | with fix: test-opt | with fix: gate | control (fix reverted) | gate failure line without the fix |",
        "|---|---|---|---|---|---|",
    ]
    for c in cells:
        recs = _records(results, c["cell"])
        patched, control = recs.get("patched"), recs.get("control")
        line = (control or {}).get("failure_line")
        verdict = (control or {}).get("verdict") or "—"
        out.append(f"| {c['cell']} | {_ICON.get(c['status'], '')} {c['status']} | {_test_cell(patched, 'test-opt')} | "
                   f"{_test_cell(patched, 'test-opt-dynamic-accum')} | {verdict} | {f'`{line}`' if line else '—'} |")
    out += ["", "## Why", ""]
    for c in cells:
        out.append(f"- **{c['cell']}**: {c['status']} — {c['reason']}")
    out += ["", "## Sources", "", "| cell | source | base commit | upstream commit | patched commit |", "|---|---|---|---|---|"]
    for c in cells:
        s = c.get("source") or {}
        out.append(f"| {c['cell']} | {s.get('description', '—')} | `{s.get('base_commit', '')[:12]}` | "
                   f"`{s.get('upstream_commit', '—')[:12]}` | `{c.get('patched_commit', '')[:12]}` |")
    out += ["", "## Timings (s)", "", "| cell | " + " | ".join(_TIMINGS) + " |", "|---|" + "---|" * len(_TIMINGS)]
    for c in cells:
        out.append(f"| {c['cell']} | " + " | ".join(str(c["timings"].get(k, "—")) for k in _TIMINGS) + " |")
    return "\n".join(out) + "\n"


_TIMINGS = ("fetch", "apply", "configure", "build_patched", "build_control")
