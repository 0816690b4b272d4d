"""What the aggregate decides from the legs' own outcomes: each leg writes what its cell step did
beside its results.json (OUTCOME_SCRIPT); the aggregate's outcomes step lists the unproven legs
that failed, fails where a proven leg did not pass, and merges the legs that passed for the bundle.
GitHub reports a failed continue-on-error leg as a success to later jobs (act does not), so
nothing here reads needs.cell.result."""

from __future__ import annotations

from . import common, proven

P_UNPROVEN = "not yet proven on GitHub"
OUTCOME_FILE = "outcome"
BUNDLED = "bundled"  # bundled/<profile>: the merge of the legs the bundle takes
# Beside results.json only: a leg that wrote none uploads nothing (the merge lists it as missing);
# skipped: its cell step never ran (a setup before it failed).
OUTCOME_SCRIPT = f"""if [ -f "$RESULTS/results.json" ]; then
  printf '%s\\n' "${{OUTCOME:-skipped}}" > "$RESULTS/{OUTCOME_FILE}"
fi
"""


def unproven_step(names: list[str]) -> dict:
    """The legs that ran with continue-on-error, named in the run's summary (known when the
    workflow is generated: leg names are matrix.yaml's names, which hold no shell or Markdown)."""
    lines = [
        f"### Legs {P_UNPROVEN} (their failures do not fail the run)",
        "",
        f"Recorded green runs on github.com are in `{proven.PATH}`; until a leg has one, it "
        "runs with `continue-on-error`.",
        "",
        *(f"- {n}" for n in names),
    ]
    text = "".join(f"{ln}\n" for ln in lines)
    return {
        "name": f"Legs {P_UNPROVEN}",
        "if": "${{ !cancelled() }}",
        "run": f"cat >> \"$GITHUB_STEP_SUMMARY\" <<'EOF'\n{text}EOF\n",
    }


# a template (str.format): its shell braces doubled
_OUTCOMES = """passed=(); failed=(); missing=()
for leg in $LEGS; do
  if [ "$(cat "cells/$leg/{OUTCOME_FILE}" 2>/dev/null)" = success ]; then passed+=("cells/$leg")
  else failed+=("$leg"); fi
done
for leg in "${{failed[@]}}"; do
  case " $REQUIRED " in *" $leg "*) missing+=("$leg") ;; esac
done
if [ "${{#failed[@]}}" -gt "${{#missing[@]}}" ]; then
  {{ echo "### Legs {P_UNPROVEN} that failed ($PROFILE: left out of its bundle)"; echo
     for leg in "${{failed[@]}}"; do
       case " $REQUIRED " in *" $leg "*) continue ;; esac
       IFS={sep} read -r _ _ target backend <<< "$leg"; echo "- $target/$backend"
     done; }} >> "$GITHUB_STEP_SUMMARY"
fi
if [ "${{#missing[@]}}" -gt 0 ]; then
  echo "::error title=ggml-patch::proven leg(s) did not pass: ${{missing[*]}}"; exit 1
fi
if [ "${{#passed[@]}}" -eq 0 ]; then
  echo "::warning title=ggml-patch::no leg of $PROFILE passed: no bundle"; exit 0
fi
ggml-patch merge-results --out "{BUNDLED}/$PROFILE" "${{passed[@]}}"
echo "bundle=true" >> "$GITHUB_OUTPUT"
"""


def outcomes_step(profile: str, leg_list: list[dict], sep: str) -> dict:
    """The profile's legs by their uploaded outcomes: a proven leg that did not pass fails the
    step (and the bundle is not made); the unproven legs that failed are listed in the summary;
    the legs that passed are merged for the bundle. `sep` splits an artifact's name into its
    parts (results, group, target, backend)."""
    legs = [leg for leg in leg_list if leg["group"] == profile]
    required = [leg["artifact"] for leg in legs if leg["required"]]
    return {
        "name": f"The legs' outcomes ({profile})",
        "id": common.step_id("outcomes", profile),
        "if": "${{ !cancelled() }}",
        "env": {
            "PROFILE": profile,
            "LEGS": " ".join(leg["artifact"] for leg in legs),
            "REQUIRED": " ".join(required),
        },
        "run": _OUTCOMES.format(
            OUTCOME_FILE=OUTCOME_FILE, P_UNPROVEN=P_UNPROVEN, BUNDLED=BUNDLED, sep=sep
        ),
    }
