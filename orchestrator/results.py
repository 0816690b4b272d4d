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
    _write_junit(results, directory)
    return [json_path, md_path]


def _write_junit(results: dict, directory: Path) -> Path:
    """junit.xml beside results.json, for CI systems' test views (orchestrator/junit.py)."""
    from .junit import junit_xml

    path = directory / "junit.xml"
    path.write_text(junit_xml(results, log_tail), encoding="utf-8")
    return path


def log_tail(path: str, lines: int = 30) -> str | None:
    """The last lines of a log (a failure's evidence in junit.xml), or None when it is not there."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 64 * 1024))  # a build log can be megabytes: only its end is read
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    return "\n".join(text.splitlines()[-lines:]) or None


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
    others = ", ".join(f"{n} {st}" for st in ("failed", "error", "build-only", "skipped")
                       if (n := sum(1 for c in cells if c["status"] == st)))
    series = results["series"]
    out = [
        f"# ggml-patch matrix: {good}/{len(cells)} cells passed" + (f" ({others})" if others else ""),
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
    out += _device_section(results)
    out += _attribution_section(cells)
    out += _training_section(cells)
    out += ["", "## Sources", "", "| cell | source | base commit | upstream commit | patched commit |", "|---|---|---|---|---|"]
    for c in cells:
        s = c.get("source") or {}
        out.append(f"| {c['cell']} | {s.get('description', '—')} | `{s.get('base_commit', '')[:12]}` | "
                   f"`{s.get('upstream_commit', '—')[:12]}` | `{c.get('patched_commit', '')[:12]}` |")
    out += ["", "## Timings (s)", "", "| cell | " + " | ".join(_TIMINGS) + " |", "|---|" + "---|" * len(_TIMINGS)]
    for c in cells:
        out.append(f"| {c['cell']} | " + " | ".join(str(c["timings"].get(k, "—")) for k in _TIMINGS) + " |")
    return "\n".join(out) + "\n"


_TIMINGS = ("fetch", "apply", "configure", "build_patched", "build_control", "control")
_GATE, _TEST_OPT = "test-opt-dynamic-accum", "test-opt"


def _rows_for(rec: dict | None, test: str, device: str) -> str:
    """One device's rows of one test: "adamw OK, sgd OK" or "p1 FAIL at step 2 (w=0.25, expected 0.5)"."""
    t = (rec or {}).get("tests", {}).get(test)
    if not t:
        return "—"
    parts = []
    for r in t.get("rows") or []:
        if r.get("device") != device:
            continue
        name = r.get("optimizer") or f"p{r.get('opt_period')}"
        detail = ""
        if r["status"] == "FAIL" and r.get("step") is not None:
            detail = f" at step {r['step']} (w={r['actual']:g}, expected {r['expected']:g})"
        parts.append(f"{name} {r['status']}{detail}")
    if t.get("stopped_on") == device:
        parts.append(f"**{t['outcome']}{' (' + t['signal'] + ')' if t.get('signal') else ''} here**")
    return ", ".join(parts) or "—"


def _devices(recs: dict[str, dict]) -> list[str]:
    seen: dict[str, None] = {}
    for rec in recs.values():
        for t in rec.get("tests", {}).values():
            for r in t.get("rows") or []:
                if r.get("device"):
                    seen.setdefault(r["device"], None)
            if t.get("stopped_on"):
                seen.setdefault(t["stopped_on"], None)
    return list(seen)


def _device_section(results: dict) -> list[str]:
    """Per device, so a Vulkan cell shows the Vulkan device's own rows, not only the CPU's."""
    out = ["", "## Per-device results", "",
           "| cell | device | with fix: test-opt | with fix: gate | without fix: test-opt | without fix: gate |",
           "|---|---|---|---|---|---|"]
    any_rows = False
    for c in results["cells"]:
        recs = _records(results, c["cell"])
        p, k = recs.get("patched"), recs.get("control")
        for dev in _devices(recs):
            any_rows = True
            out.append(f"| {c['cell']} | {dev} | {_rows_for(p, _TEST_OPT, dev)} | {_rows_for(p, _GATE, dev)} | "
                       f"{_rows_for(k, _TEST_OPT, dev)} | {_rows_for(k, _GATE, dev)} |")
    return out if any_rows else []


def _attribution_section(cells: list[dict]) -> list[str]:
    """Every test failing with the fix: pre-existing (fails without it too) or a regression."""
    rows = [(c, e) for c in cells for e in c.get("attribution") or []]
    if not rows:
        return []
    out = ["", "## Failure attribution", "",
           "Each test failing with the fix, compared with the same test and device without it (the control).", "",
           "| cell | test | device | with the fix | without the fix | attribution |", "|---|---|---|---|---|---|"]
    for c, e in rows:
        out.append(f"| {c['cell']} | {e['test']} | {e.get('device') or '—'} | {e['with_fix']} | {e['without_fix']} | "
                   f"**{e['label']}** |")
    return out


def _training_section(cells: list[dict]) -> list[str]:
    """Loss per epoch with and without the fix (native_tests/train-opt-dynamic), per cell."""
    from .training import table_markdown

    out = []
    for c in cells:
        t = c.get("training")
        if not t:
            continue
        verdict = {True: "as the bug predicts", False: "NOT as the bug predicts", None: "undecided"}
        out += ["", f"### {c['cell']}: {verdict[t.get('diverges_as_predicted')]}", "",
                table_markdown(t["with_fix"], t["without_fix"]).rstrip("\n")]
    return (["", "## Training: loss per epoch with and without the fix"] + out) if out else []
