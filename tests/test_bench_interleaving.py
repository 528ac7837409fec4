"""benchmarks/_bench.py's item-by-item interleaving: every item goes to every
callable in every round, the order rotating from item to item (no timing is
asserted: the calls are recorded)."""

import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "_bench.py"
_SPEC = importlib.util.spec_from_file_location("_bench_under_test", _PATH)
_bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(_bench)


def test_every_item_goes_to_every_callable_in_rotating_order():
    calls = []
    functions = {
        name: (lambda item, name=name: calls.append((name, item))) for name in "abc"
    }
    samples = _bench.interleaved_items(functions, [10, 11, 12, 13], rounds=2, warmup=1)
    assert calls[:3] == [("a", 10), ("b", 10), ("c", 10)]  # the warmup
    timed = calls[3:]
    assert len(timed) == 2 * 4 * 3
    firsts = [timed[i][0] for i in range(0, len(timed), 3)]
    assert firsts == ["a", "b", "c", "a", "b", "c", "a", "b"]  # rotating
    for at in range(0, len(timed), 3):
        group = timed[at : at + 3]
        assert sorted(name for name, _ in group) == ["a", "b", "c"]
        assert len({item for _, item in group}) == 1
    items = [item for _, item in timed[::3]]
    assert items == [10, 11, 12, 13] * 2
    assert set(samples) == {"a", "b", "c"}
    assert all(len(s) == 2 and all(t >= 0 for t in s) for s in samples.values())


def test_a_failing_callable_is_not_hidden():
    def fails(item):
        raise ValueError(f"bad item {item}")

    with pytest.raises(ValueError, match="bad item 1"):
        _bench.interleaved_items({"ok": lambda item: None, "bad": fails}, [1], 1, 0)
