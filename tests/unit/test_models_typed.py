"""Issue 22: no record of the tool has a `dict[str, Any]` field (a document's parts are types)."""

import importlib
import pkgutil

import pytest
from pydantic import BaseModel

import orchestrator

pytestmark = pytest.mark.unit


def _models() -> list[type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for mod in pkgutil.walk_packages(orchestrator.__path__, "orchestrator."):
        if mod.name.endswith(".__main__"):  # runs the CLI when imported
            continue
        module = importlib.import_module(mod.name)
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, BaseModel)
                and obj.__module__.startswith("orchestrator.")
            ):
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return [found[k] for k in sorted(found)]


def test_every_model_is_found():
    names = {m.__name__ for m in _models()}
    assert {"Results", "FinetuneResults", "PretrainInfo"} <= names, names


def test_no_model_field_is_a_dict_of_anything():
    loose = [
        f"{m.__module__}.{m.__qualname__}.{name}: {field.annotation!r}"
        for m in _models()
        for name, field in m.model_fields.items()
        if "dict[str, typing.Any]" in repr(field.annotation)
        or "Dict[str, Any]" in repr(field.annotation)
    ]
    assert loose == []
