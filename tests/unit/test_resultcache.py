"""Result-cache keys: any input change changes the key; storage is atomic."""

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.run.resultcache import cell_key, load, store

BASE = {
    "base": "a" * 40,
    "series": "b" * 64,
    "flags": ["-DGGML_CPU=ON"],
    "env": {},
    "toolchain": {"cmake": "4.4.5"},
}


def test_key_is_stable_and_order_independent():
    assert cell_key(BASE) == cell_key(dict(reversed(list(BASE.items()))))


@given(st.sampled_from(sorted(BASE)), st.text(min_size=1, max_size=5))
def test_any_change_changes_the_key(field, suffix):
    changed = dict(BASE)
    changed[field] = str(BASE[field]) + suffix
    assert cell_key(changed) != cell_key(BASE)


def test_store_and_load(tmp_path):
    assert load(tmp_path, "k") is None
    store(tmp_path, "k", {"cell": {"status": "passed"}})
    assert load(tmp_path, "k") == {"cell": {"status": "passed"}}
    (tmp_path / "half.json").write_text('{"cell": ')  # what an interrupted writer could leave
    assert load(tmp_path, "half") is None
    assert not list(tmp_path.glob("*.tmp"))
