"""Feeds malformed requests to exported SavedModels in a fresh interpreter (run as a
script).

    python -I malformed_requests_process.py SAVED_MODEL_DIR {session|tf2} [...]

For each pair of arguments in turn, loads the model with that loader
("session": `tf.compat.v1.saved_model.loader.load` in a Session of its own
graph, fed without the Python client's shape check, as TF Serving feeds it;
"tf2": `tf.saved_model.load`, calling the signature functions). Imports
tensorflow and tensorflow_text only, and prints one JSON line per request as
soon as it is answered: ``{"run": index of the pair, "case": ..., "outcome":
"ok" | error class, "message": ..., "shapes": {...}}``, then the run's
``"modules"`` line. A crash ends the output early, so the last line printed
names the request before the one that killed the process.
"""

import importlib.util
import json
import pathlib
import sys

import numpy as np

# (case, signature, inputs): wrong ranks, an empty axis, a batch mismatch, ids
# outside the vocabulary; then a good request, which must still be answered.
TEXT = np.array([b"14 juillet 1989"], dtype=object)
CASES = [
    ("text_rank_0", "serving_default", {"text": np.array(b"14 juillet 1989", object)}),
    ("text_shape_2x0", "serving_default", {"text": np.empty([2, 0], object)}),
    ("text_shape_1x2", "serving_default", {"text": np.array([[b"a b", b"c"]], object)}),
    ("text_shape_1x1", "serving_default", {"text": np.array([[b"a b"]], object)}),
    ("nbest_rank_0", "translate_nbest", {"text": np.array(b"14 juillet", object)}),
    ("nbest_shape_2x0", "translate_nbest", {"text": np.empty([2, 0], object)}),
    ("nbest_shape_1x2", "translate_nbest", {"text": np.array([[b"a", b"b"]], object)}),
    (
        "ids_rank_1",
        "serve",
        {"source": np.array([4, 5], np.int32), "target_in": np.array([2], np.int32)},
    ),
    (
        "ids_rank_3",
        "serve",
        {
            "source": np.full([1, 1, 2], 4, np.int32),
            "target_in": np.full([1, 1, 1], 2, np.int32),
        },
    ),
    (
        "ids_batch_mismatch",
        "serve",
        {
            "source": np.full([2, 3], 4, np.int32),
            "target_in": np.full([1, 1], 2, np.int32),
        },
    ),
    (
        "ids_no_source_column",
        "serve",
        {
            "source": np.zeros([2, 0], np.int32),
            "target_in": np.full([2, 1], 2, np.int32),
        },
    ),
    (
        "ids_outside_vocabulary",
        "serve",
        {
            "source": np.array([[4, 10**6]], np.int32),
            "target_in": np.array([[2]], np.int32),
        },
    ),
    (
        "ids_negative",
        "serve",
        {
            "source": np.array([[4, 5]], np.int32),
            "target_in": np.array([[-3]], np.int32),
        },
    ),
    ("good_after_bad", "serving_default", {"text": TEXT}),
    (
        "good_ids_after_bad",
        "serve",
        {
            "source": np.array([[4, 5]], np.int32),
            "target_in": np.array([[2]], np.int32),
        },
    ),
]


def _session_runner(path):
    import tensorflow as tf

    # session_replay.py (check-serving's replay) holds the unchecked feed; load it
    # by path so that this process imports nothing of keras_selfattn.
    replay_path = (
        pathlib.Path(__file__).resolve().parents[2]
        / "keras_selfattn"
        / "serving"
        / "session_replay.py"
    )
    spec = importlib.util.spec_from_file_location("session_replay", replay_path)
    replay = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replay)
    session = tf.compat.v1.Session(graph=tf.Graph())
    meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)

    def run(signature_name, inputs):
        signature = meta_graph.signature_def[signature_name]
        feed = {signature.inputs[k].name: v for k, v in inputs.items()}
        fetch = {k: v.name for k, v in signature.outputs.items()}
        return replay.run_unchecked(session, fetch, feed)

    return run


def _tf2_runner(path):
    import tensorflow as tf

    loaded = tf.saved_model.load(path)

    def run(signature_name, inputs):
        function = loaded.signatures[signature_name]
        outputs = function(**{k: tf.constant(v) for k, v in inputs.items()})
        return {k: v.numpy() for k, v in outputs.items()}

    return run


def main():
    pairs = sys.argv[1:]
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers its ops)

    for index in range(len(pairs) // 2):
        path, loader = pairs[2 * index], pairs[2 * index + 1]
        run = {"session": _session_runner, "tf2": _tf2_runner}[loader](path)
        for case, signature, inputs in CASES:
            line = {"run": index, "case": case}
            try:
                outputs = run(signature, inputs)
                line["outcome"] = "ok"
                line["shapes"] = {k: list(np.shape(v)) for k, v in outputs.items()}
            except tf.errors.OpError as error:
                line["outcome"] = type(error).__name__
                line["message"] = error.message[:500]
            print(json.dumps(line), flush=True)
        leaked = [m for m in sys.modules if m.startswith("keras_selfattn")]
        modules = {"run": index, "case": "modules", "outcome": "ok", "leaked": leaked}
        print(json.dumps(modules), flush=True)


if __name__ == "__main__":
    main()
