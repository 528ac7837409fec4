"""Malformed requests never kill the serving process.

TF Serving does not check a request's shape against the signature
(tensorflow/serving#1436): before the in-graph checks, a rank-0 ``text`` crashed
the process with SIGSEGV and shape [2, 0] with SIGABRT, under both loaders, and
[1, 2] answered once for two sentences. The loaders run in a fresh interpreter
(one for the exports and loaders in turn, each load in a graph of its own), so a
crash is a failed test, not a dead pytest.
"""

import json
import pathlib
import sys

import pytest

from tests.serving.test_export import run_fresh_process

# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).with_name("malformed_requests_process.py")


def malformed_outcomes(runs):
    """`SCRIPT` on each ``(SavedModel directory, loader)`` of ``runs``, one after
    the other in one fresh process: per run, ``{case: its line}``. A process that
    dies fails here, naming the last requests answered."""
    done = run_fresh_process(
        [sys.executable, "-I", str(SCRIPT), *(str(a) for run in runs for a in run)]
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line]
    answered = [(runs[line["run"]][1], line["case"]) for line in lines]
    assert done.returncode == 0, (
        f"the process died (exit {done.returncode}) after {answered[-3:]}:\n"
        + done.stderr[-2000:]
    )
    outcomes = [{} for _ in runs]
    for line in lines:
        outcomes[line.pop("run")][line["case"]] = line
    return outcomes


def test_malformed_requests_get_invalid_argument(
    text_export, xla_export, malformed_reports
):
    """Every malformed request answers InvalidArgument, under both loaders; the
    XLA export too (its checks run before the compiled search)."""
    runs = [(text_export, "session"), (text_export, "tf2"), (xla_export, "session")]
    for run in runs:
        outcomes = dict(malformed_reports[run])
        assert not outcomes.pop("modules")["leaked"], "the SavedModel must load alone"
        good = {"good_after_bad", "good_ids_after_bad"}
        for case, line in outcomes.items():
            if case in good:
                assert line["outcome"] == "ok", (run, line)
            else:
                assert line["outcome"] == "InvalidArgumentError", (run, line)
        assert outcomes["good_after_bad"]["shapes"] == {
            "translation": [1],
            "score": [1],
        }
        assert outcomes["good_ids_after_bad"]["shapes"]["logits"][:2] == [1, 1]
        # The messages say what is wrong.
        assert "[1,2]" in outcomes["text_shape_1x2"]["message"]
        assert "same batch size" in outcomes["ids_batch_mismatch"]["message"]
        assert "outside its vocabulary" in outcomes["ids_outside_vocabulary"]["message"]
        assert "negative id" in outcomes["ids_negative"]["message"]
        assert "at least one column" in outcomes["ids_no_source_column"]["message"]
