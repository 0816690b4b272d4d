"""The target's own bug form (a GitHub issue form, .github/ISSUE_TEMPLATE/*.yml) read from its tree
at the base commit, and ISSUE.md rendered as GitHub renders a filed form: one `### <label>` per
field, in the form's order, `_No response_` where the run has no data. The tool fills the fields
with data only; the form asks the reporter to write it, so ISSUE.md says to reword it. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

import yaml

from .. import publish
from .pr_body import ascii_text

FORM_DIR = ".github/ISSUE_TEMPLATE"
NO_RESPONSE = "_No response_"  # what GitHub shows for an optional field left empty
_INPUTS = ("input", "textarea", "dropdown", "checkboxes")


@dataclass(frozen=True)
class FormField:
    id: str
    type: str  # input | textarea | dropdown | checkboxes
    label: str
    required: bool = False
    options: tuple[str, ...] = ()  # dropdown
    render: str = ""  # a textarea rendered as code (e.g. shell)
    value: str = ""  # a textarea's prefilled text (e.g. a <details> block for logs)


@dataclass(frozen=True)
class IssueForm:
    file: str  # in the target's tree, e.g. .github/ISSUE_TEMPLATE/019-bug-misc.yml
    name: str
    title: str  # the title the form starts with, e.g. "Misc. bug: "
    labels: tuple[str, ...]
    fields: tuple[FormField, ...] = field(default=())


class FormError(ValueError):
    """The file is not an issue form: one line naming the key and what is expected."""


def pick_bug_form(names: list[str]) -> Optional[str]:
    """The form for a bug that fits no narrower one: a name with "bug" and "misc", else the first
    with "bug" (GitHub lists forms by file name)."""
    forms = sorted(n for n in names if n.endswith((".yml", ".yaml")) and n != "config.yml")
    bugs = [n for n in forms if "bug" in n.lower()]
    misc = [n for n in bugs if "misc" in n.lower() or "other" in n.lower()]
    found = misc or bugs
    return found[0] if found else None


def _text(where: str, value: Any, key: str) -> str:
    if not isinstance(value, str):
        raise FormError(f"{where}: {key}: expected text, got {type(value).__name__}")
    return value


def parse_form(file: str, text: str) -> IssueForm:
    """An issue form's YAML: its name, title, labels and input fields (markdown blocks skipped)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise FormError(f"{file}: not valid YAML ({str(e).splitlines()[0][:80]})") from None
    if not isinstance(data, dict) or not isinstance(data.get("body"), list):
        raise FormError(f"{file}: body: expected a list of form elements")
    labels = data.get("labels") or []
    if isinstance(labels, str):
        labels = [s.strip() for s in labels.split(",") if s.strip()]
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
        raise FormError(f"{file}: labels: expected a list of label names")
    fields = []
    for i, element in enumerate(data["body"]):
        where = f"{file}: body[{i}]"
        if not isinstance(element, dict):
            raise FormError(f"{where}: expected a mapping with type and attributes")
        kind = element.get("type")
        if kind not in _INPUTS:
            continue  # markdown: text for the reporter, no field
        attributes = element.get("attributes") or {}
        if not isinstance(attributes, dict):
            raise FormError(f"{where}.attributes: expected a mapping")
        label = _text(where, attributes.get("label"), "attributes.label")
        options = attributes.get("options") or []
        if kind == "checkboxes":
            options = [o.get("label", "") if isinstance(o, dict) else o for o in options]
        validations = element.get("validations") or {}
        fields.append(
            FormField(
                id=str(element.get("id") or label),
                type=kind,
                label=label.strip(),
                required=bool(isinstance(validations, dict) and validations.get("required")),
                options=tuple(str(o) for o in options),
                render=str(attributes.get("render") or ""),
                value=str(attributes.get("value") or ""),
            )
        )
    if not fields:
        raise FormError(f"{file}: body: no input field (input, textarea, dropdown, checkboxes)")
    name = _text(file, data.get("name", ""), "name")
    title = _text(file, data.get("title", ""), "title")
    return IssueForm(file, name, title, tuple(labels), tuple(fields))


# The fields the run has data for, by what a field asks (its id or label); None: no such data.
_ROLES = (
    ("version", re.compile(r"version", re.I)),
    ("os", re.compile(r"operating|\bos\b", re.I)),
    ("module", re.compile(r"module|component", re.I)),
    ("command", re.compile(r"command", re.I)),
    ("bisect", re.compile(r"bad commit|bisect", re.I)),
    ("logs", re.compile(r"\blogs?\b", re.I)),
    ("problem", re.compile(r"problem|description|reproduce|what happened", re.I)),
)


def role_of(f: FormField) -> Optional[str]:
    for role, pattern in _ROLES:
        if pattern.search(f.id) or pattern.search(f.label):
            return role
    return None


# without a form in the target's tree: the fields of llama.cpp's own bug form, by role
DEFAULT_FORM = IssueForm(
    file="",
    name="Bug report",
    title="",
    labels=(),
    fields=(
        FormField("version", "textarea", "Name and Version", required=True),
        FormField("command", "textarea", "Command line", render="shell"),
        FormField("info", "textarea", "Problem description & steps to reproduce", required=True),
        FormField("logs", "textarea", "Relevant log output"),
    ),
)


def chosen_options(f: FormField, wanted: list[str]) -> list[str]:
    """The form's own options that start with one of `wanted` (case-insensitive), in form order."""
    low = [w.lower() for w in wanted]
    return [o for o in f.options if any(o.lower().startswith(w) for w in low)]


def _logs_value(f: FormField, lines: list[str]) -> list[str]:
    """The log lines inside the form's own prefilled block (e.g. <details> with a console fence)."""
    prefilled = f.value.splitlines()
    fence = next((i for i, ln in enumerate(prefilled) if ln.strip().startswith("```")), None)
    if fence is None:
        return ["```console", *lines, "```"]
    kept = [ln for ln in prefilled if not ln.strip().startswith("<!--")]
    fence = next(i for i, ln in enumerate(kept) if ln.strip().startswith("```"))
    after = kept[fence + 1 :]
    close = next((i for i, ln in enumerate(after) if ln.strip() == "```"), len(after))
    inside_blank = all(not ln.strip() for ln in after[:close])
    body = lines if inside_blank else [*after[:close], *lines]
    return [*kept[: fence + 1], *body, *after[close:]]


def render(
    form: IssueForm, values: dict[str, list[str]], title: str, cover_path: str = "patches/cover.md"
) -> str:
    """ISSUE.md: a comment for the contributor (form, labels, title), then each field as GitHub
    shows a filed form. values: role -> lines (a dropdown's: the chosen options); cover_path: the
    topic's cover.md, where the issue's URL goes."""
    if form.file:
        labels = ", ".join(form.labels) or "none"
        source = f"follows the bug form {form.file} ({form.name}); labels: {labels}"
    else:
        source = "has the usual bug report fields: the target's tree has no issue form"
    out = [
        "<!--",
        _in_comment(f"ggml-patch: ISSUE.md {source}."),
        _in_comment(f"Title: {form.title}{title}"),
        "The fields hold the run's data; the form asks you to write the report yourself:",
        "put it in your own words before you open the issue, then record its URL in",
        f"{cover_path} (a line `issue: URL` above the first heading).",
        "-->",
        "",
    ]
    for f in form.fields:
        role = role_of(f)
        lines = values.get(role or "", [])
        out += [f"### {_inert(f.label)}", ""]
        if not lines:
            out += [NO_RESPONSE, ""]
        elif f.type == "dropdown":
            out += [", ".join(_inert(x) for x in lines), ""]
        elif role == "logs":
            out += [*_logs_value(f, lines), ""]
        elif f.render:
            out += [f"```{f.render}", *lines, "```", ""]
        else:
            out += [*lines, ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _inert(value: str) -> str:
    """The form's own text (the target's file: data) as inert ASCII Markdown."""
    return publish.text(ascii_text(value))


def _in_comment(line: str) -> str:
    """One line inside an HTML comment, in ASCII: nothing in it can close the comment."""
    flat = publish.one_line(ascii_text(line))
    return flat.replace("--", "- -").replace("<", "&lt;").replace(">", "&gt;")


def missing_required(form: IssueForm, values: dict[str, list[str]]) -> list[str]:
    """The labels of required fields the run has no data for (the contributor fills them)."""
    return [f.label for f in form.fields if f.required and not values.get(role_of(f) or "")]
