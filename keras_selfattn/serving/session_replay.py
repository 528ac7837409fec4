r"""Replays Predict requests against a SavedModel under the session-based loader.

Run as a SCRIPT in a fresh interpreter (``python .../session_replay.py ...``), never
imported by the package: it imports TensorFlow and, only when asked,
tensorflow_text; nothing of keras_selfattn and no Keras. This is the closest
stand-in for ``tensorflow_model_server`` that installs here: the same loader
(``tf.compat.v1.saved_model.loader.load`` in a ``tf.compat.v1.Session``, i.e.
``LoadSavedModel`` in C++), the signature's tensor names, the init op that fills
the lookup tables, and feeds that reach the graph without a shape check (the
Python client's ``Session.run`` refuses a feed whose shape does not fit the
placeholder; TF Serving's C++ server does not, see tensorflow/serving#1436).
Before each request it prints ``replaying: SIGNATURE/NAME`` on stderr, so a crash
names the request that caused it.

    python .../session_replay.py SAVED_MODEL_DIR REQUESTS.json RESULTS.json \
        [--tensorflow-text]

REQUESTS.json: ``[{"name": str, "signature": str, "inputs": {input name:
base64 of a serialized TensorProto}}]``. RESULTS.json: ``{"tensorflow_text_imported":
bool, "load_seconds": float, "signatures": {...}, "results": [{"name", "signature",
"ok", "error", "seconds", "outputs": {name: {"dtype", "shape", "values"}}}]}``
(strings as UTF-8 text, or ``{"invalid_utf8_b64": ...}`` when not valid UTF-8).
A version the loader refuses (a damaged variables file, a missing asset) is not
a crash: TF Serving refuses that version and keeps serving the others, so the
script writes ``{"load_error": "TYPE: message"}`` (one line) and exits 0.
"""

import argparse
import base64
import json
import math
import os
import sys
import time


def _isolate_script():
    """Run as a script, Python puts this file's folder (the package's serving/) first
    on sys.path: drop it so that none of its modules can shadow another one; and
    quiet TensorFlow's C++ logs unless the caller chose a level. (Done in `main`
    only: the tests import `run_unchecked` from here.)"""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def _values(array):
    """A JSON-ready flat list of an output's values."""
    values = []
    for value in array.reshape(-1).tolist():
        if isinstance(value, bytes):
            try:
                values.append(value.decode("utf-8"))
            except UnicodeDecodeError:
                values.append(
                    {"invalid_utf8_b64": base64.b64encode(value).decode("ascii")}
                )
        elif isinstance(value, float) and not math.isfinite(value):
            values.append(str(value))
        else:
            values.append(value)
    return values


def run_unchecked(session, fetch, feed):
    """``session.run(fetch, feed)`` as TF Serving runs it: no client-side shape check.

    Args:
        session: the `tf.compat.v1.Session` holding the loaded graph.
        fetch: dict output name -> tensor name.
        feed: dict tensor name -> `numpy.ndarray`.

    Returns:
        dict output name -> `numpy.ndarray`.
    """
    import numpy as np

    graph = session.graph
    names = sorted(fetch)
    # pylint: disable=protected-access  (the C API call under Session.run)
    outputs = session._call_tf_sessionrun(
        None,
        {graph.get_tensor_by_name(k)._as_tf_output(): v for k, v in feed.items()},
        [graph.get_tensor_by_name(fetch[name])._as_tf_output() for name in names],
        [],
        None,
    )
    # A scalar string comes back as bare bytes; Session.run would give an array.
    return {
        name: np.asarray(value, dtype=object if isinstance(value, bytes) else None)
        for name, value in zip(names, outputs)
    }


def _dtype_name(dtype):
    import tensorflow as tf

    return tf.dtypes.as_dtype(dtype).name


def _signature_dtypes(signature_defs):
    """signature name -> {"inputs": {name: dtype}, "outputs": {name: dtype}}."""
    return {
        name: {
            "inputs": {k: _dtype_name(v.dtype) for k, v in sig.inputs.items()},
            "outputs": {k: _dtype_name(v.dtype) for k, v in sig.outputs.items()},
        }
        for name, sig in signature_defs.items()
        if not name.startswith("__")
    }


def _replay(session, signature_defs, request):
    """Runs one request: {"error": ...} or {"ok": True, "outputs": ...}, timed."""
    import tensorflow as tf
    from tensorflow.core.framework import tensor_pb2

    signature = signature_defs.get(request["signature"])
    if signature is None:
        return {"error": f"no signature {request['signature']!r}"}
    if set(request["inputs"]) != set(signature.inputs):
        return {
            "error": f"inputs {sorted(request['inputs'])} != signature inputs "
            f"{sorted(signature.inputs)}"
        }
    feed = {}
    for name, encoded in request["inputs"].items():
        proto = tensor_pb2.TensorProto()
        proto.ParseFromString(base64.b64decode(encoded))
        feed[signature.inputs[name].name] = tf.make_ndarray(proto)
    fetch = {name: info.name for name, info in signature.outputs.items()}
    print(
        f"replaying: {request['signature']}/{request['name']}",
        file=sys.stderr,
        flush=True,
    )
    began = time.monotonic()
    try:
        outputs = run_unchecked(session, fetch, feed)
    except Exception as error:  # noqa: BLE001  (reported, not raised: the next request still runs)
        return {
            "error": f"{type(error).__name__}: {str(error)[:2000]}",
            "seconds": time.monotonic() - began,
        }
    return {
        "seconds": time.monotonic() - began,
        "ok": True,
        "outputs": {
            name: {
                "dtype": "string"
                if value.dtype == object
                else _dtype_name(value.dtype),
                "shape": list(value.shape),
                "values": _values(value),
            }
            for name, value in outputs.items()
        },
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("saved_model_dir")
    parser.add_argument("requests")
    parser.add_argument("results")
    parser.add_argument(
        "--tensorflow-text", action="store_true", help="import tensorflow_text first"
    )
    args = parser.parse_args(argv)
    _isolate_script()

    import tensorflow as tf

    if args.tensorflow_text:
        import tensorflow_text  # noqa: F401  (registers its ops)

    with open(args.requests, encoding="utf-8") as handle:
        requests = json.load(handle)
    report = {"results": []}
    start = time.monotonic()
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        try:
            meta_graph = tf.compat.v1.saved_model.loader.load(
                session, ["serve"], args.saved_model_dir
            )
        except Exception as error:  # noqa: BLE001  (the loader's refusal, any type)
            message = " ".join(str(error).split())[:1000]
            report = {"load_error": f"{type(error).__name__}: {message}"}
            with open(args.results, "w", encoding="utf-8") as handle:
                json.dump(report, handle)
            return 0
        report["load_seconds"] = time.monotonic() - start
        report["signatures"] = _signature_dtypes(meta_graph.signature_def)
        for request in requests:
            result = {
                "name": request["name"],
                "signature": request["signature"],
                "ok": False,
                "error": None,
            }
            report["results"].append(result)
            result.update(_replay(session, meta_graph.signature_def, request))
    report["tensorflow_text_imported"] = "tensorflow_text" in sys.modules
    report["keras_selfattn_imported"] = "keras_selfattn" in sys.modules
    with open(args.results, "w", encoding="utf-8") as handle:
        json.dump(report, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
