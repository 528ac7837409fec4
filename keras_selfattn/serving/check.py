"""``keras-selfattn check-serving BASE/N``: will stock TF Serving load and run this?

It RUNS the model's graph: check models you trust. Before running anything, the
audit refuses graphs that would write files (`op_tables.REFUSED_IO_OPS`) and warns
about those that read them (`op_tables.WARNED_IO_OPS`).

Two checks, no server needed:

1. the op audit (`keras_selfattn.serving.audit`): every op type of the graph is
   core TensorFlow or a tensorflow-text op that stock TF Serving links, none calls
   back into Python or writes files, and the checked TF Serving release is not
   older than the TensorFlow that exported the model;
2. a replay under the session-based loader, in a fresh interpreter that imports
   TensorFlow (and tensorflow_text only when the graph needs it), feeding each
   request as TF Serving does, without the Python client's shape check:

   - the warmup records of ``assets.extra/``, and the `warmup.bad_request_batches`
     (empty batch, empty strings, invalid UTF-8, 10,000 and 200,000 characters,
     unknown words) on every signature that takes ``text``: each must answer,
     within the timeout, with one output row per input, valid UTF-8 strings and
     finite numbers;
   - the `warmup.malformed_inputs` (a bare string instead of a list, shapes
     [2, 0] and [1, 2] for ``text``; a wrong rank for every input of known rank)
     on every signature: each must answer InvalidArgument. A crash of the
     replay process (a signal: TF Serving would die the same way) names the
     request; a version the loader refuses is "does not load: FILE: reason"
     (TF Serving refuses it and keeps serving the other versions). Each is one
     problem line.

   A graph of core ops only is loaded WITHOUT tensorflow_text, which proves that
   it needs no tensorflow-text op.

Stopped by SIGTERM, SIGINT or SIGHUP (a supervisor's stop, Ctrl-C, a closed
terminal), `check_serving` raises `CheckStopped` after its child processes have
ended and its temporary folder is gone.
"""

import dataclasses
import functools
import json
import os
import pathlib
import re
import signal
import sys
import tempfile

from keras_selfattn.choices import XLA_SERVER_FLAG
from keras_selfattn.serving import audit as audit_lib
from keras_selfattn.serving import export_report, replay_requests
from keras_selfattn.serving.audit import audit_saved_model_proto
from keras_selfattn.serving.op_tables import installed_op_registry
from keras_selfattn.serving.saved_model_graph import read_saved_model
from keras_selfattn.stopping import Stopped, run_to_the_end, signals_stop

__all__ = ["CheckStopped", "ServingCheck", "check_serving"]

_REPLAY_SCRIPT = pathlib.Path(__file__).with_name("session_replay.py")
_REPLAYING = "replaying: "  # session_replay.py's progress lines on stderr


@dataclasses.dataclass
class ServingCheck:
    """The result of `check_serving`.

    Attributes:
        path: the SavedModel directory.
        audit: the `audit.OpAudit`.
        tensorflow_text_imported: whether the replay process imported tensorflow_text
            (None when nothing was run).
        signatures: signature name -> {"inputs": {name: dtype}, "outputs": {...}}.
        results: one dict per replayed request (see ``session_replay.py``), with
            ``expect``: the error a malformed request must get (None: an answer).
        problems: what fails, one line each (empty when the check passes).
        warnings: what passes but serves slower here, one line each (a
            bfloat16 export on a host without bfloat16 units:
            `export_report.cpu_warnings`).
    """

    path: pathlib.Path
    audit: audit_lib.OpAudit
    tensorflow_text_imported: bool | None = None
    signatures: dict = dataclasses.field(default_factory=dict)
    results: list = dataclasses.field(default_factory=list)
    problems: list = dataclasses.field(default_factory=list)
    warnings: list = dataclasses.field(default_factory=list)

    @property
    def ok(self):
        return not self.problems

    def summary_line(self):
        """A passed check in one line (what ``check-serving`` prints without
        ``--verbose``): the op count, the oldest TF Serving release that loads
        it, the requests answered as expected; then each warning (and the XLA
        server flag, when needed) on a line of its own. A failed check is its
        whole `summary`: the op list and each request."""
        if not self.ok:
            return self.summary()
        audit = self.audit
        ops = "core TensorFlow ops only"
        if audit.tensorflow_text:
            ops = f"{len(audit.tensorflow_text)} of them tensorflow-text ops"
        release = (
            f"loads on TF Serving {audit.oldest_serving} or newer"
            if audit.oldest_serving
            else "serve it with the TF Serving release of its TensorFlow, or newer"
        )
        answered = sum(1 for result in self.results if _passed(result))
        line = (
            f"check-serving: OK: {self.path}: {len(audit.op_types)} op types "
            f"({ops}), {release}; {answered} of {len(self.results)} requests "
            "answered as expected (check-serving --verbose lists them)"
        )
        lines = [line]
        if audit.needs_xla_flag:
            lines.append(
                f"XLA: on CPU run tensorflow_model_server with {XLA_SERVER_FLAG}"
            )
        lines += [f"WARNING: {w}" for w in self.warnings]
        return "\n".join(lines)

    def summary(self):
        """Human-readable lines: the audit, each request, the verdict."""
        lines = [f"SavedModel: {self.path}", self.audit.summary()]
        if self.tensorflow_text_imported is not None:
            lines.append(
                "session loader: loaded and ran "
                + (
                    "with tensorflow_text imported"
                    if self.tensorflow_text_imported
                    else "WITHOUT tensorflow_text (core TensorFlow only)"
                )
            )
        for result in self.results:
            seconds = result.get("seconds")
            timing = f"{seconds * 1000:.0f} ms" if seconds is not None else ""
            shapes = ", ".join(
                f"{k} {v['shape']}"
                for k, v in sorted(result.get("outputs", {}).items())
            )
            expected = result.get("expect")
            status = "ok " if _passed(result) else "ERR"
            if expected and status == "ok ":
                shapes = f"rejected: {expected}"
            lines.append(
                f"  {status} {result['signature']:<16} {result['name']:<14} "
                f"{timing:>8}  {shapes}"
            )
        lines += [f"WARNING: {w}" for w in self.warnings]
        lines += [f"PROBLEM: {p}" for p in self.problems]
        lines.append(
            "check-serving: OK"
            if self.ok
            else f"check-serving: FAILED ({len(self.problems)} problems)"
        )
        return "\n".join(lines)


def _signature_io(saved_model):
    """signature name -> ({input: dtype}, {output: dtype}, {input: rank or None}),
    from the parsed SavedModel (`read_saved_model`)."""
    import tensorflow as tf

    def dtype(info):
        return tf.dtypes.as_dtype(info.dtype).name  # "string", "float32", "int32"

    def rank(info):
        shape = info.tensor_shape
        return None if shape.unknown_rank else len(shape.dim)

    return {
        name: (
            {k: dtype(v) for k, v in sig.inputs.items()},
            {k: dtype(v) for k, v in sig.outputs.items()},
            {k: rank(v) for k, v in sig.inputs.items()},
        )
        for name, sig in saved_model.meta_graphs[0].signature_def.items()
        if not name.startswith("__")
    }


def _result_problems(result, request, signatures):
    """What is wrong with one replayed request's answer."""
    where = f"{result['signature']}/{result['name']}"
    expected_error = request.get("expect")
    if expected_error:
        return _rejection_problems(result, where, expected_error)
    if not result["ok"]:
        return [f"{where}: {result['error']}"]
    expected = signatures[result["signature"]][1]
    batch = replay_requests.batch_size(request)
    problems = []
    for name, output in result["outputs"].items():
        problems += _output_problems(
            f"{where}: output {name}", output, expected.get(name), batch
        )
    return problems


def _rejection_problems(result, where, expected_error):
    """What is wrong with the answer to a malformed request (it must be refused)."""
    if result["ok"]:
        shapes = {k: v["shape"] for k, v in result["outputs"].items()}
        message = (
            f"{where}: answered {shapes} for a malformed request instead of "
            f"{expected_error} (TF Serving passes unchecked shapes to the graph)"
        )
        return [message]
    if not result["error"].startswith(expected_error):
        return [f"{where}: expected {expected_error}, got {result['error']}"]
    return []


def _output_problems(what, output, expected_dtype, batch):
    """What is wrong with one output (``what``: "SIGNATURE/REQUEST: output NAME")."""
    problems = []
    if output["dtype"] != expected_dtype:
        problems.append(
            f"{what} is {output['dtype']}, the signature says {expected_dtype}"
        )
    if batch is not None and (not output["shape"] or output["shape"][0] != batch):
        problems.append(f"{what} has shape {output['shape']} for a batch of {batch}")
    for value in output["values"]:
        if isinstance(value, dict):
            problems.append(f"{what} holds bytes that are not UTF-8")
            break
        # The replay writes non-finite numbers as the strings "nan", "inf".
        if output["dtype"] != "string" and isinstance(value, str):
            problems.append(f"{what} holds a non-finite number ({value})")
            break
    return problems


def _replay_failure(done):
    """One problem line for a replay process that failed, naming the request it
    ran: a signal is a crash (TF Serving would die the same way); an exit status
    is the replay's own failure (its last stderr line, no traceback)."""
    lines = done.stderr.splitlines()
    running = [line.split(_REPLAYING, 1)[1] for line in lines if _REPLAYING in line]
    during = f" while running {running[-1]}" if running else ""
    said = [line.strip() for line in lines if line.strip() and _REPLAYING not in line]
    last = f": {said[-1][:300]}" if said else ""
    if done.returncode >= 0:
        return (
            f"the session-loader replay failed (exit status {done.returncode})"
            f"{during}{last}"
        )
    try:
        how = f"killed by {signal.Signals(-done.returncode).name}"
    except ValueError:
        how = f"killed by signal {-done.returncode}"
    return (
        f"the session-loader replay crashed ({how}){during}; a TF Serving process "
        f"would die the same way{last}"
    )


def _load_failure(saved_model_dir, load_error):
    """``does not load: FILE: reason`` for a version the loader refused (FILE: the
    version's file the error names, else the version folder)."""
    root = str(saved_model_dir.resolve())
    named = re.search(re.escape(root) + r"[^\s;:,'\"]*", load_error)
    where = named.group(0) if named else str(saved_model_dir)
    if not named and "RestoreV2" in load_error:  # reading the variables failed
        where = str(saved_model_dir / "variables")
    reason = load_error.replace(named.group(0), "the file") if named else load_error
    return (
        f"does not load: {where}: {reason[:500]} (TF Serving refuses this version "
        "and keeps serving the others)"
    )


class CheckStopped(Stopped):
    """`check_serving` stopped by a signal, its child processes ended and its
    temporary files removed; ``exit_status`` is the shell's 128 + the signal's
    number (130 SIGINT, 143 SIGTERM, 129 SIGHUP)."""

    def __init__(self, signum):
        name = signal.Signals(signum).name
        super().__init__(
            signum,
            f"check-serving stopped by {name}: its replay process "
            "ended and its temporary files were removed",
        )


def _stops_cleanly(function):
    @functools.wraps(function)
    def stopping_cleanly(*args, **kwargs):
        with signals_stop(stopped=CheckStopped):
            return function(*args, **kwargs)

    return stopping_cleanly


def _passed(result):
    """Whether a replayed request got what it should: an answer, or (a malformed
    request, ``expect``) the error it must get."""
    expected = result.get("expect")
    if expected:
        return not result["ok"] and result["error"].startswith(expected)
    return bool(result["ok"])


# Long: mostly its docstring; the checks in order, each a function.
@_stops_cleanly
def check_serving(
    saved_model_dir, serving_version=None, run=True, timeout=600, python=None
):
    """Audits a SavedModel's ops and replays requests under the session-based loader.

    This RUNS the model's graph (in a subprocess), unless the audit fails: check
    models you trust. A graph with an op that writes files is refused unrun.

    Args:
        saved_model_dir: a version folder, e.g. ``exports/translator/1``.
        serving_version: the TF Serving release to audit against (e.g. ``"2.19"``);
            None: every release since tensorflow-text was pinned.
        run: also load and run the signatures (in a subprocess; skipped when
            the audit already failed: a stock server would not load the graph).
        timeout: seconds the replay may take in all (a hang fails the check).
        python: the interpreter for the replay (default: this one).

    Returns:
        A `ServingCheck`: ``ok`` whether it passed, ``summary()`` why (``warnings``:
        the CPU features a bfloat16 export assumes that this host lacks).

    Raises:
        FileNotFoundError: no ``saved_model.pb`` in ``saved_model_dir``.
        ValueError: ``saved_model.pb`` is not a SavedModel, or ``serving_version``
            is not a version number.
        CheckStopped: stopped by a signal, after cleaning up (module docstring).
    """
    saved_model_dir = pathlib.Path(saved_model_dir)
    if not (saved_model_dir / "saved_model.pb").is_file():
        raise FileNotFoundError(
            f"No saved_model.pb in {saved_model_dir}: give a version folder such as "
            "BASE/1"
        )
    saved_model = read_saved_model(saved_model_dir)  # garbage: a ValueError, at once
    registry = installed_op_registry(python)
    op_audit = audit_saved_model_proto(saved_model, serving_version, registry)
    check = ServingCheck(saved_model_dir, op_audit)
    check.warnings = _host_warnings(saved_model_dir)
    signatures = _signature_io(saved_model)
    check.signatures = {
        k: {"inputs": i, "outputs": o} for k, (i, o, _) in signatures.items()
    }
    check.problems += _static_problems(op_audit, signatures, serving_version)
    if not run or not op_audit.ok:
        return check  # a stock server would not load it, or it must not be run

    needs_text = bool(op_audit.tensorflow_text)
    requests = replay_requests.requests(saved_model_dir, signatures)
    report, failure = _replay(saved_model_dir, requests, needs_text, timeout, python)
    if failure:
        check.problems.append(failure)
        return check
    if "load_error" in report:
        check.problems.append(_load_failure(saved_model_dir, report["load_error"]))
        return check
    check.tensorflow_text_imported = report["tensorflow_text_imported"]
    check.results = report["results"]
    check.problems += _import_problems(report, needs_text)
    for request, result in zip(requests, check.results):
        result["expect"] = request.get("expect")
        check.problems += _result_problems(result, request, signatures)
    return check


def _host_warnings(saved_model_dir):
    """What serves slower on this host: the CPU features the export assumes."""
    report = export_report.read_export_report(saved_model_dir)
    return export_report.cpu_warnings(report, export_report.host_cpu_flags())


def _static_problems(op_audit, signatures, serving_version):
    """What the audit and the signatures alone show, before anything runs."""
    problems = [
        f"op {op}: {reason}" for op, reason in sorted(op_audit.problems.items())
    ]
    for name, (_, outputs, _) in signatures.items():
        problems += [
            f"{name}: output {o} ends in _bytes (TF Serving's REST API would base64 it)"
            for o in outputs
            if o.endswith("_bytes")
        ]
    problems += [
        f"TF Serving {serving_version}: {reason}"
        for reason in op_audit.release_problems
    ]
    return problems


def _import_problems(report, needs_text):
    """What the replay process imported that it should not have."""
    problems = []
    if not needs_text and report["tensorflow_text_imported"]:
        problems.append(
            "tensorflow_text was imported although the graph has core ops only"
        )
    if report["keras_selfattn_imported"]:
        problems.append(
            "the replay imported keras_selfattn: the SavedModel must load without it"
        )
    return problems


def _replay(saved_model_dir, requests, needs_text, timeout, python):
    """Runs ``session_replay.py`` on ``requests``: (its report, None) or (None, why)."""
    with tempfile.TemporaryDirectory(prefix="check-serving-") as scratch:
        requests_path, results_path = (
            pathlib.Path(scratch, "requests.json"),
            pathlib.Path(scratch, "results.json"),
        )
        requests_path.write_text(json.dumps(requests), encoding="utf-8")
        command = [
            python or sys.executable,
            str(_REPLAY_SCRIPT),
            str(saved_model_dir.resolve()),
            str(requests_path),
            str(results_path),
        ]
        if needs_text:
            command.append("--tensorflow-text")
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""}
        done = run_to_the_end(command, env, timeout)
        if done is None:
            return None, (
                f"the session-loader replay did not finish within {timeout} s (a hang?)"
            )
        if done.returncode != 0 or not results_path.is_file():
            return None, _replay_failure(done)
        return json.loads(results_path.read_text(encoding="utf-8")), None
