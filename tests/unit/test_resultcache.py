"""Result-cache keys: any input change changes the key; storage is atomic."""

import threading
import time

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.run.resultcache import cell_key, copy_logs, load, store, store_with_logs

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


def test_copy_logs_writes_only_what_the_results_do_not_already_hold(tmp_path):
    """Issue 35: a no-change re-run into the same results copies no log it already has (each copy
    costs two opens, which a loaded machine stretches); a changed or missing log is copied."""
    logs, cache, dest = tmp_path / "logs", tmp_path / "cache", tmp_path / "results"
    (logs / "sub").mkdir(parents=True)
    (logs / "build.log").write_text("built\n")
    (logs / "sub" / "test.log").write_text("passed\n")
    store_with_logs(cache, "k", {"x": 1}, logs)
    copy_logs(cache, "k", dest)
    changed = [dest / "build.log", dest / "sub" / "test.log"]
    written = [f.stat().st_ctime_ns for f in changed]
    time.sleep(0.05)  # past the file system's clock tick: a rewrite would show
    copy_logs(cache, "k", dest)
    assert [f.stat().st_ctime_ns for f in changed] == written
    (dest / "sub" / "test.log").write_text("edited\n")
    (dest / "build.log").unlink()
    copy_logs(cache, "k", dest)
    assert [f.read_text() for f in changed] == ["built\n", "passed\n"]


def test_two_writers_of_one_key_at_once_both_succeed(tmp_path):
    """Two cells with the same inputs share a key and may store at the same moment (the CI run
    of test_reliability's two-target matrix did), and a third may read the entry meanwhile: none
    raises, and the entry's logs are whole with no temporary copy left behind."""
    logs, cache = tmp_path / "logs", tmp_path / "cache"
    (logs / "sub").mkdir(parents=True)
    for i in range(40):
        (logs / "sub" / f"{i}.log").write_text(f"line {i}\n" * 50)
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for _ in range(10):
                store_with_logs(cache, "k", {"writer": n}, logs)
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    def read(n: int) -> None:
        try:
            for _ in range(10):
                copy_logs(cache, "k", tmp_path / f"reader-{n}")
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    store_with_logs(cache, "k", {"writer": 0}, logs)
    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    threads += [threading.Thread(target=read, args=(n,)) for n in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(p.name for p in (cache / "k-logs" / "sub").iterdir()) == sorted(
        f"{i}.log" for i in range(40)
    )
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []
    assert load(cache, "k")["writer"] in range(4)
    assert len(list((tmp_path / "reader-0" / "sub").iterdir())) == 40
