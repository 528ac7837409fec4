"""Shared pytest setup: quiet TensorFlow, deterministic seeds, a clean dtype policy."""

import functools
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _fast_xla_compiling():
    """XLA's CPU compiler set to compile fast (`tests.xla_flags`), for this
    process and the processes its tests start (they inherit ``XLA_FLAGS``). XLA
    reads the flags at its first compile, after this. Under JAX, whose XLA is
    jaxlib's, they are left as they are (tests/test_jax_backend.py gives its
    process its own)."""
    from importlib import metadata

    from tests.xla_flags import for_tensorflow

    if os.environ.get("KERAS_BACKEND", "tensorflow") != "tensorflow":
        return
    try:
        flags = for_tensorflow(metadata.version("tensorflow"))
    except (metadata.PackageNotFoundError, ValueError):
        return
    os.environ["XLA_FLAGS"] = " ".join(
        [os.environ.get("XLA_FLAGS", ""), *flags]
    ).strip()


_fast_xla_compiling()


def _stop_signals_at_their_defaults():
    """SIGINT, SIGTERM and SIGHUP as a shell's foreground program receives them.

    The package leaves a stop signal that its process ignores ignored (as a
    program under ``nohup`` wants: `keras_selfattn.stopping`), so in a suite
    started with them ignored (``nohup``, a background job of a shell without
    job control) its signal tests would find no handler to test. The tests'
    processes and their children get the dispositions a user's command has.
    """
    import signal

    defaults = {signal.SIGINT: signal.default_int_handler}
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(signum) is signal.SIG_IGN:
            signal.signal(signum, defaults.get(signum, signal.SIG_DFL))


_stop_signals_at_their_defaults()


def _import_keras_quietly():
    """Imports the package (and Keras, TensorFlow) with TensorFlow's native log lines
    dropped from fd 2 (`tests.quiet_import`)."""
    from tests.quiet_import import import_quietly

    import_quietly("keras_selfattn")


_import_keras_quietly()

import keras
import pytest

if keras.backend.backend() == "jax":
    import jax

    if jax.default_backend() == "gpu":
        # JAX multiplies float32 matrices in TF32 on a GPU by default (about 1e-4
        # off a float32 result); the references here are float32 or float64. On
        # an H200, 18 tests of test_multi_head_self_attention.py failed at the
        # default and passed with JAX_DEFAULT_MATMUL_PRECISION=highest.
        jax.config.update("jax_default_matmul_precision", "highest")


@pytest.fixture(autouse=True)
def _clean_keras_state():
    """Every test starts in float32 with a fixed seed and leaves it that way."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
    # Keras' global state only: clear_session()'s default full garbage collection
    # walks the worker's whole heap after every test (about 0.3 s of CPU under
    # TensorFlow or JAX, a large share of the suite's time); Python's own collector
    # still frees the test's objects as it goes.
    keras.backend.clear_session(free_memory=False)


# With pytest-xdist, tests are handed out one at a time to whichever worker is
# free, except where tests share an expensive fixture: a file that defines a
# module-, class- or session-scoped fixture (a trained run) goes to one worker
# whole, and the files of tests/serving share session fixtures (the committed
# tiny runs' exports and the fresh process that serves them), so they go to one
# worker together; the exports are then made once, not once a worker. (The
# xdist_group marker cannot do this with pytest 9 and pytest-xdist 3.8.)
SHARED_FIXTURE_DIRS = ("tests/serving/",)
# Tests in different files that read one run trained once per test run
# (tests/training/reference_run.py): one worker runs them one after the other, so
# the second reads the run instead of waiting, idle, while the other trains it.
SHARED_RUN_TESTS = {
    "tests/test_no_figures.py::test_a_run_without_figures_writes_its_metrics_and_"
    "never_imports_matplotlib": "no_figures_run",
    "tests/training/test_concurrent_trains.py::test_two_trains_at_once_on_one_"
    "directory": "no_figures_run",
}
SHARED_FIXTURE_SCOPES = ('scope="module"', 'scope="class"', 'scope="session"')
ROOT = pathlib.Path(__file__).resolve().parents[1]


@functools.cache
def shares_fixtures(path):
    """Whether the test file ``path`` (relative to the repository) defines a
    fixture its tests share (module, class or session scope)."""
    try:
        source = (ROOT / path).read_text(encoding="utf-8")
    except OSError:
        return True  # unknown: keep its tests together
    return any(scope in source for scope in SHARED_FIXTURE_SCOPES)


def scheduling_unit(nodeid):
    """What one xdist worker runs together: the tests that share a run, the
    shared directory or file that holds the test ``nodeid``, or the test alone."""
    if nodeid in SHARED_RUN_TESTS:
        return SHARED_RUN_TESTS[nodeid]
    path = nodeid.split("::", 1)[0]
    for directory in SHARED_FIXTURE_DIRS:
        if path.startswith(directory):
            return directory
    return path if shares_fixtures(path) else nodeid


@pytest.hookimpl(optionalhook=True)  # without xdist (-p no:xdist) there is no such hook
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    # Hand the units out in collection order (longest first, below), not
    # xdist's default of the units with the most tests first.
    config.option.loadscopereorder = False

    class SharedFixturesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return scheduling_unit(nodeid)

    return SharedFixturesTogether(config, log)


# The longest files first (CI prints the slowest tests), then the other tests
# marked slow, then the files that run whole (their shared fixture), then the
# single tests: the two xdist workers start on the long ones at once and end on
# short ones, instead of one idling while the other runs a long test or a whole
# file that came last.
LONGEST_FIRST = (
    "tests/test_jax_backend.py",
    "tests/training/test_multi_worker.py",
    "tests/serving/",
    "tests/training/test_mirrored.py",
    "tests/training/test_train.py",
    "tests/test_cli.py",
    "tests/test_examples.py",
    # Whole (module fixtures), and it continues a copy of test_cli.py's run: after
    # it, so that the run is usually trained by the time this file asks for it.
    "tests/training/test_continuation.py",
)


# The fixtures that train a model (or read one trained once per test run, which
# the first test to ask for it trains): a test that uses one, directly or through
# another fixture, belongs to the slow tier, so that ``-m "not slow"`` trains
# nothing.
TRAINED_RUN_FIXTURES = frozenset(
    {
        "teacher",  # tests/test_distillation.py
        "uninterrupted",  # tests/training/test_train.py
        "twelve_steps",  # tests/training/test_continuation.py
        "trained_run",  # tests/test_cli.py
        "quick_run",  # tests/test_benchmarks.py
    }
)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if TRAINED_RUN_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)

    def rank(item):
        path = item.nodeid.split("::", 1)[0]
        listed = next(
            (i for i, prefix in enumerate(LONGEST_FIRST) if path.startswith(prefix)),
            len(LONGEST_FIRST),
        )
        alone = scheduling_unit(item.nodeid) == item.nodeid
        return listed, item.get_closest_marker("slow") is None, alone

    items.sort(key=rank)  # stable: otherwise the order within a file stays


def pytest_configure(config):
    """The census of what the run cost (processes started, models trained) and
    the fast tier's limit: `tests.suite_census`."""
    from tests.suite_census import Census

    census = Census()
    census.install()
    config.pluginmanager.register(census, "suite_census")
