"""The suite's census and its fast tier (tests/suite_census.py), on a suite of
three tests run in this process (pytester)."""

pytest_plugins = ["pytester"]

SUITE = """
import subprocess, sys, time

import pytest


def _busy(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class Forked(subprocess.Popen):
    forked = True  # as tests.forked_commands.Popen marks its processes


def test_quick():
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert Forked([sys.executable, "-c", "pass"]).wait() == 0


def test_busy_not_marked():
    _busy(0.6)


@pytest.mark.slow
def test_busy_marked_slow():
    _busy(0.6)
    subprocess.run([sys.executable, "-c", "pass"], check=True)
"""

CONFTEST = """
def pytest_configure(config):
    from tests.suite_census import Census

    census = Census()
    census.install()
    config.pluginmanager.register(census, "suite_census")
"""


def _run(pytester, monkeypatch, *args):
    """The three-test suite run in this process with the fast tier at 0.3 CPU-s."""
    monkeypatch.setenv("KSA_FAST_TIER_SECONDS", "0.3")
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(test_suite=SUITE)
    return pytester.runpytest_inprocess(
        "-p", "no:xdist", "-p", "no:cacheprovider", *args
    )


def test_the_fast_tier_fails_a_busy_test_not_marked_slow(pytester, monkeypatch):
    """``-m "not slow"``: the busy test not marked slow fails with its CPU time
    and the limit, and is listed at the end; the census counts the process
    started (and the forked one apart); its wrappers of `subprocess.Popen` and
    `keras.Model.fit` are taken off when the run ends."""
    import subprocess

    import keras

    before = subprocess.Popen.__init__, keras.Model.fit
    run = _run(pytester, monkeypatch, "-m", "not slow")

    run.assert_outcomes(passed=1, failed=1, deselected=1)
    out = run.stdout.str()
    assert "test_busy_not_marked took " in out and "CPU-s, over the fast tier" in out
    assert "not marked slow: test_suite.py::test_busy_not_marked" in out
    run.stdout.fnmatch_lines(
        ["processes started: 1 (0 of them training), 1 forked from a loaded one *"]
    )
    assert (subprocess.Popen.__init__, keras.Model.fit) == before


def test_a_run_of_both_tiers_lists_the_busy_test_and_fails_none(pytester, monkeypatch):
    """The whole suite (CI's run): the busy test not marked slow is listed at
    the end, not failed, so that no outcome there hangs on how busy the host is;
    the test marked slow is not listed; both processes are counted."""
    run = _run(pytester, monkeypatch)

    run.assert_outcomes(passed=3)
    out = run.stdout.str()
    assert "not marked slow: test_suite.py::test_busy_not_marked" in out
    assert "CPU-s, over the fast tier" not in out
    assert "test_busy_marked_slow" not in out
    run.stdout.fnmatch_lines(
        [
            "processes started: 2 (0 of them training), 1 forked *",
            "    2 processes,   0 fits: test_suite.py",
        ]
    )


def test_the_census_by_kind_sums_each_file_s_durations_into_its_kind(tmp_path, capsys):
    """scripts/suite_census_by_kind.py: a test's setup, call and teardown are
    summed into its file, each file into its kind (first match of `KINDS`); a
    log without durations is a usage error naming it."""
    import importlib.util
    import pathlib

    import pytest

    path = pathlib.Path(__file__).parents[1] / "scripts" / "suite_census_by_kind.py"
    spec = importlib.util.spec_from_file_location("suite_census_by_kind", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    log = tmp_path / "log"
    log.write_text(
        "2.50s setup    tests/serving/test_export.py::test_a\n"
        "1.25s call     tests/serving/test_export.py::test_a\n"
        "4.00s call     tests/test_jax_backend.py::test_all\n"
        "0.75s call     tests/layers/test_dropout.py::test_bits[1-2]\n"
        "0.50s teardown tests/test_code_shape.py::test_lines\n"
        "12 passed in 9.00s\n",
        encoding="utf-8",
    )
    script.main([str(log), "--files", "2"])
    out = capsys.readouterr().out
    assert "| exports and serving | 1 | 4 |" in out, out
    assert "| the JAX run (one test) | 1 | 4 |" in out, out
    assert "| models, layers, searches in this process | 1 | 1 |" in out, out
    assert "| lint-like checks | 1 | 0 |" in out, out
    assert "| all | 4 | 9 |" in out, out
    assert (
        out.count("| `tests/") == 2
        and "| `tests/serving/test_export.py` | 3.8 |" in out
    )
    assert script.kind_of("tests/training/test_mirrored.py").startswith("processes")
    assert script.kind_of("tests/training/test_train.py").startswith("trainings")
    empty = tmp_path / "empty"
    empty.write_text("1 passed\n", encoding="utf-8")
    with pytest.raises(SystemExit):
        script.main([str(empty)])
    assert f"no --durations lines in {empty}" in capsys.readouterr().err
