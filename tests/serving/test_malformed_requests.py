"""Malformed requests never kill the serving process.

TF Serving does not check a request's shape against the signature
(tensorflow/serving#1436): before the in-graph checks, a rank-0 ``text`` crashed
the process with SIGSEGV and shape [2, 0] with SIGABRT, under both loaders, and
[1, 2] answered once for two sentences. Each loader runs in a fresh interpreter,
so a crash is a failed test, not a dead pytest.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = pytest.mark.slow

SCRIPT = pathlib.Path(__file__).with_name("malformed_requests_process.py")


@pytest.mark.parametrize(
    "export, loader",
    [("text_export", "session"), ("text_export", "tf2"), ("xla_export", "session")],
)
def test_malformed_requests_get_invalid_argument(request, export, loader):
    """Every malformed request answers InvalidArgument; the XLA export too (its
    checks run before the compiled search)."""
    text_export = request.getfixturevalue(export)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [sys.executable, "-I", str(SCRIPT), str(text_export), loader],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line]
    answered = [line["case"] for line in lines]
    assert done.returncode == 0, (
        f"the {loader} process died (exit {done.returncode}) after {answered}:\n"
        + done.stderr[-2000:]
    )
    outcomes = {line["case"]: line for line in lines}
    assert not outcomes.pop("modules")["leaked"], "the SavedModel must load alone"
    good = {"good_after_bad", "good_ids_after_bad"}
    for case, line in outcomes.items():
        if case in good:
            assert line["outcome"] == "ok", line
        else:
            assert line["outcome"] == "InvalidArgumentError", line
    assert outcomes["good_after_bad"]["shapes"] == {"translation": [1], "score": [1]}
    assert outcomes["good_ids_after_bad"]["shapes"]["logits"][:2] == [1, 1]
    # The messages say what is wrong.
    assert "[1,2]" in outcomes["text_shape_1x2"]["message"]
    assert "same batch size" in outcomes["ids_batch_mismatch"]["message"]
    assert "outside its vocabulary" in outcomes["ids_outside_vocabulary"]["message"]
    assert "negative id" in outcomes["ids_negative"]["message"]
    assert "at least one column" in outcomes["ids_no_source_column"]["message"]
