"""``keras-selfattn check-serving BASE/N``: will stock TF Serving load and run this?

Two checks, no server needed:

1. the op audit (`keras_selfattn.serving.audit`): every op type of the graph is
   core TensorFlow or a tensorflow-text op that stock TF Serving links, and none
   calls back into Python;
2. a replay under the session-based loader, in a fresh interpreter that imports
   TensorFlow (and tensorflow_text only when the graph needs it): the warmup
   records of ``assets.extra/`` and the `bad_request_batches` (empty batch, empty
   strings, invalid UTF-8, 10,000 characters, unknown words) on every signature
   that takes ``text``. Each must answer, within the timeout, with one output row
   per input, valid UTF-8 strings and finite numbers. A graph of core ops only is
   loaded WITHOUT tensorflow_text, which proves that it serves on any TF Serving build.
"""

import base64
import dataclasses
import json
import os
import pathlib
import subprocess
import sys
import tempfile

from keras_selfattn.serving import audit as audit_lib

__all__ = ["ServingCheck", "check_serving"]

_REPLAY_SCRIPT = pathlib.Path(__file__).with_name("session_replay.py")
_TEXT_INPUT = {"text": "string"}


@dataclasses.dataclass
class ServingCheck:
    """The result of `check_serving`.

    Attributes:
        path: the SavedModel directory.
        audit: the `audit.OpAudit`.
        tensorflow_text_imported: whether the replay process imported tensorflow_text
            (None when nothing was run).
        signatures: signature name -> {"inputs": {name: dtype}, "outputs": {...}}.
        results: one dict per replayed request (see ``session_replay.py``).
        problems: what fails, one line each (empty when the check passes).
    """

    path: pathlib.Path
    audit: audit_lib.OpAudit
    tensorflow_text_imported: bool | None = None
    signatures: dict = dataclasses.field(default_factory=dict)
    results: list = dataclasses.field(default_factory=list)
    problems: list = dataclasses.field(default_factory=list)

    @property
    def ok(self):
        return not self.problems

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
            status = "ok " if result["ok"] else "ERR"
            seconds = result.get("seconds")
            timing = f"{seconds * 1000:.0f} ms" if seconds is not None else ""
            shapes = ", ".join(
                f"{k} {v['shape']}"
                for k, v in sorted(result.get("outputs", {}).items())
            )
            lines.append(
                f"  {status} {result['signature']:<16} {result['name']:<14} {timing:>8}  {shapes}"
            )
        lines += [f"PROBLEM: {p}" for p in self.problems]
        lines.append(
            "check-serving: OK"
            if self.ok
            else f"check-serving: FAILED ({len(self.problems)} problems)"
        )
        return "\n".join(lines)


def _signature_io(saved_model_dir):
    """signature name -> ({input: dtype name}, {output: dtype name}), read from saved_model.pb."""
    import tensorflow as tf
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(
        (pathlib.Path(saved_model_dir) / "saved_model.pb").read_bytes()
    )

    def dtype(info):
        return tf.dtypes.as_dtype(info.dtype).name  # "string", "float32", "int32"

    return {
        name: (
            {k: dtype(v) for k, v in sig.inputs.items()},
            {k: dtype(v) for k, v in sig.outputs.items()},
        )
        for name, sig in saved_model.meta_graphs[0].signature_def.items()
        if not name.startswith("__")
    }


def _requests(saved_model_dir, signatures):
    """The warmup records and the bad-request batches, as replay requests."""
    import tensorflow as tf

    from keras_selfattn.serving import warmup

    def encode(proto):
        return base64.b64encode(proto.SerializeToString()).decode("ascii")

    requests = []
    warmup_path = pathlib.Path(saved_model_dir) / warmup.WARMUP_FILE
    if warmup_path.is_file():
        for i, log in enumerate(warmup.read_warmup_requests(warmup_path)):
            request = log.predict_log.request
            requests.append(
                {
                    "name": f"warmup[{i}]",
                    "signature": request.model_spec.signature_name or "serving_default",
                    "inputs": {k: encode(v) for k, v in request.inputs.items()},
                }
            )
    for signature, (inputs, _) in sorted(signatures.items()):
        if inputs != _TEXT_INPUT:
            continue
        for name, batch in warmup.bad_request_batches().items():
            proto = tf.make_tensor_proto(batch, dtype=tf.string, shape=[len(batch)])
            requests.append(
                {
                    "name": name,
                    "signature": signature,
                    "inputs": {"text": encode(proto)},
                }
            )
    return requests


def _batch_size(request):
    from tensorflow.core.framework import tensor_pb2

    sizes = set()
    for encoded in request["inputs"].values():
        proto = tensor_pb2.TensorProto()
        proto.ParseFromString(base64.b64decode(encoded))
        if proto.tensor_shape.dim:
            sizes.add(proto.tensor_shape.dim[0].size)
    return sizes.pop() if len(sizes) == 1 else None


def _result_problems(result, request, signatures):
    """What is wrong with one replayed request's answer."""
    where = f"{result['signature']}/{result['name']}"
    if not result["ok"]:
        return [f"{where}: {result['error']}"]
    problems = []
    expected = signatures[result["signature"]][1]
    batch = _batch_size(request)
    for name, output in result["outputs"].items():
        if output["dtype"] != expected.get(name):
            problems.append(
                f"{where}: output {name} is {output['dtype']}, the signature says {expected.get(name)}"
            )
        if batch is not None and (not output["shape"] or output["shape"][0] != batch):
            problems.append(
                f"{where}: output {name} has shape {output['shape']} for a batch of {batch}"
            )
        for value in output["values"]:
            if isinstance(value, dict):
                problems.append(
                    f"{where}: output {name} holds bytes that are not UTF-8"
                )
                break
            if output["dtype"] != "string" and isinstance(
                value, str
            ):  # "nan", "inf" from the replay
                problems.append(
                    f"{where}: output {name} holds a non-finite number ({value})"
                )
                break
    return problems


def check_serving(
    saved_model_dir, serving_version=None, run=True, timeout=600, python=None
):
    """Audits a SavedModel's ops and replays requests under the session-based loader.

    Args:
        saved_model_dir: a version folder, e.g. ``exports/translator/1``.
        serving_version: the TF Serving release to audit against (e.g. ``"2.19"``);
            None: every release since tensorflow-text was pinned.
        run: also load and run the signatures (in a subprocess; skipped when
            the audit already failed: a stock server would not load the graph).
        timeout: seconds the replay may take in all (a hang fails the check).
        python: the interpreter for the replay (default: this one).

    Returns:
        A `ServingCheck`; ``check.ok`` says whether it passed, ``check.summary()``
        explains.
    """
    saved_model_dir = pathlib.Path(saved_model_dir)
    if not (saved_model_dir / "saved_model.pb").is_file():
        raise FileNotFoundError(
            f"No saved_model.pb in {saved_model_dir}: give a version folder such as BASE/1"
        )
    registry = audit_lib.installed_op_registry(python)
    op_audit = audit_lib.audit_saved_model(saved_model_dir, serving_version, registry)
    check = ServingCheck(saved_model_dir, op_audit)
    check.problems += [
        f"op {op}: {reason}" for op, reason in sorted(op_audit.problems.items())
    ]
    signatures = _signature_io(saved_model_dir)
    check.signatures = {
        k: {"inputs": i, "outputs": o} for k, (i, o) in signatures.items()
    }
    for name, (_, outputs) in signatures.items():
        check.problems += [
            f"{name}: output {o} ends in _bytes (TF Serving's REST API would base64 it)"
            for o in outputs
            if o.endswith("_bytes")
        ]
    if not run or op_audit.problems:
        return check

    needs_text = bool(op_audit.tensorflow_text)
    requests = _requests(saved_model_dir, signatures)
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
        try:
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except subprocess.TimeoutExpired:
            check.problems.append(
                f"the session-loader replay did not finish within {timeout} s (a hang?)"
            )
            return check
        if done.returncode != 0 or not results_path.is_file():
            check.problems.append(
                f"the session loader failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
            )
            return check
        report = json.loads(results_path.read_text(encoding="utf-8"))
    check.tensorflow_text_imported = report["tensorflow_text_imported"]
    check.results = report["results"]
    if not needs_text and check.tensorflow_text_imported:
        check.problems.append(
            "tensorflow_text was imported although the graph has core ops only"
        )
    if report["keras_selfattn_imported"]:
        check.problems.append(
            "the replay imported keras_selfattn: the SavedModel must load without it"
        )
    for request, result in zip(requests, check.results):
        check.problems += _result_problems(result, request, signatures)
    return check
