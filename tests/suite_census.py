"""What a test run cost, counted as it runs and printed at its end.

A pytest plugin (registered by tests/conftest.py). It counts, in every process
that runs tests (each xdist worker, summed by the controller):

- the Python processes the tests started (`subprocess.Popen` of this interpreter,
  of a ``python`` or of the ``keras-selfattn`` console script), and of them the
  ones that ran a command line that trains (``train``, ``demo``; not their
  ``--help``); the processes forked from a server that has imported
  TensorFlow already (`tests.forked_commands`) are counted apart, as they pay
  no interpreter start-up;
- the models trained in the test processes themselves (`keras.Model.fit` calls).

A model trained inside a started process is counted once, as that process's
command, not as a fit call (its calls happen where this plugin is not loaded).
The summary line is what docs/development.md's census reads, with the test files
that start the most processes and train the most models beside it; the slowest
tests come from ``--durations``.

The fast tier stays fast: in a run that selects no slow test (``-m "not slow"``,
one fast file), a test that is not marked ``slow`` and takes longer than
`FAST_TIER_SECONDS` fails (its report says its time and the limit), so that
that run remains the loop one runs while editing. A run of everything (CI's)
lists such tests at its end and fails none of them for its time: a test's
outcome there does not hang on how busy the host is.
"""

import functools
import os
import pathlib
import subprocess
import sys
import time

import pytest

# A test whose call takes more CPU time than this belongs to the slow tier. CPU
# seconds of the test process (all its threads), not wall time: they hardly move
# when the machine is shared, where wall time doubles. Generous: the check keeps
# the tier fast; it is not a timing test of any one case.
FAST_TIER_SECONDS = 8.0
TRAINING_COMMANDS = ("train", "demo")
COUNTS = ("processes", "training_processes", "forked", "fits")
FILES_LISTED = 10  # the test files the summary names, most processes first
CPU_SECONDS = pytest.StashKey[float]()


class Census:
    def __init__(self):
        self.counts = dict.fromkeys(COUNTS, 0)
        self.by_file = {}  # test file -> [processes, fits]
        self.too_slow = []
        # KSA_FAST_TIER_SECONDS overrides the limit (a slower host, the tests
        # of this plugin).
        self.limit = float(os.environ.get("KSA_FAST_TIER_SECONDS", FAST_TIER_SECONDS))
        self.enforced = True  # only in a run of the fast tier alone

    def pytest_collection_finish(self, session):
        self.enforced = not any(
            item.get_closest_marker("slow") for item in session.items
        )

    # The counting.

    def started(self, args, *, forked=False):
        argv = [args] if isinstance(args, (str, os.PathLike)) else list(args or [])
        if not argv or not _is_python(str(argv[0])):
            return
        if forked:  # `tests.forked_commands`: no interpreter start-up paid
            self.counts["forked"] += 1
            return
        self.counts["processes"] += 1
        self._count_for_the_test_file(0)
        words = {str(word) for word in argv[1:]}
        if words & set(TRAINING_COMMANDS) and not words & {"--help", "-h"}:
            self.counts["training_processes"] += 1

    def fitted(self):
        self.counts["fits"] += 1
        self._count_for_the_test_file(1)

    def _count_for_the_test_file(self, column):
        """Counts against the file of the test (or fixture) running now."""
        running = os.environ.get("PYTEST_CURRENT_TEST", "")
        path = running.split("::", 1)[0] or "(outside a test)"
        self.by_file.setdefault(path, [0, 0])[column] += 1

    def install(self):
        """Counts from now on: `subprocess.Popen` and, where Keras is loaded,
        `keras.Model.fit` wrapped (`uninstall` puts them back)."""
        census = self
        popen_init = subprocess.Popen.__init__

        @functools.wraps(popen_init)
        def counting_init(popen, args, *rest, **kwargs):
            census.started(args, forked=getattr(popen, "forked", False))
            return popen_init(popen, args, *rest, **kwargs)

        self._restore = [(subprocess.Popen, "__init__", popen_init)]
        subprocess.Popen.__init__ = counting_init
        keras = sys.modules.get("keras")
        if keras is None:  # nothing trains where Keras was never imported
            return
        fit = keras.Model.fit

        @functools.wraps(fit)
        def counting_fit(model, *args, **kwargs):
            census.fitted()
            return fit(model, *args, **kwargs)

        self._restore.append((keras.Model, "fit", fit))
        keras.Model.fit = counting_fit

    def uninstall(self):
        for owner, name, original in reversed(getattr(self, "_restore", [])):
            setattr(owner, name, original)
        self._restore = []

    # The pytest hooks.

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        started = time.process_time()
        yield
        item.stash[CPU_SECONDS] = time.process_time() - started

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.when != "call" or not report.passed or "slow" in item.keywords:
            return
        seconds = item.stash.get(CPU_SECONDS, 0.0)
        if seconds > self.limit:
            self.too_slow.append((item.nodeid, seconds))
            if self.enforced:
                report.outcome = "failed"
                report.longrepr = (
                    f"{item.nodeid} took {seconds:.1f} CPU-s, over the fast tier's "
                    f"{self.limit:g}: make it cheaper or mark it "
                    "@pytest.mark.slow"
                )

    def pytest_sessionfinish(self, session):
        workeroutput = getattr(session.config, "workeroutput", None)
        if workeroutput is not None:  # an xdist worker: hand the counts over
            workeroutput["census"] = dict(self.counts)
            workeroutput["too_slow"] = list(self.too_slow)
            workeroutput["by_file"] = dict(self.by_file)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        output = getattr(node, "workeroutput", {})
        for name, count in output.get("census", {}).items():
            self.counts[name] = self.counts.get(name, 0) + count
        self.too_slow.extend(tuple(item) for item in output.get("too_slow", []))
        for path, (processes, fits) in output.get("by_file", {}).items():
            counts = self.by_file.setdefault(path, [0, 0])
            counts[0] += processes
            counts[1] += fits

    def pytest_unconfigure(self, config):
        self.uninstall()

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        if hasattr(config, "workeroutput"):
            return
        counts = self.counts
        terminalreporter.write_sep("=", "suite census")
        terminalreporter.write_line(
            f"processes started: {counts['processes']} "
            f"({counts['training_processes']} of them training), "
            f"{counts['forked']} forked from a loaded one (tests.forked_commands); "
            f"models trained in the test processes: {counts['fits']} (Model.fit)"
        )
        ranked = sorted(
            self.by_file.items(), key=lambda item: (-item[1][0], -item[1][1])
        )
        for path, (processes, fits) in ranked[:FILES_LISTED]:
            terminalreporter.write_line(
                f"  {processes:3d} processes, {fits:3d} fits: {path}"
            )
        if self.too_slow:
            terminalreporter.write_sep("=", "too slow for the fast tier")
            for nodeid, seconds in sorted(self.too_slow, key=lambda item: -item[1]):
                terminalreporter.write_line(
                    f"{seconds:.1f} CPU-s > {self.limit:g}, not marked slow: {nodeid}"
                )


def _is_python(program):
    name = pathlib.PurePath(program).name
    return (
        program == sys.executable
        or name.startswith("python")
        or name == "keras-selfattn"
    )
