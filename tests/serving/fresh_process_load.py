"""Loads an exported SavedModel in a fresh interpreter with both loaders (run as a
script).

Imports tensorflow and, unless ``--no-tensorflow-text``, tensorflow_text; nothing
of keras_selfattn. Prints JSON: for each loader ("tf2": `tf.saved_model.load`,
"session": `tf.compat.v1.saved_model.loader.load` in a Session) and each
signature, the outputs for the texts given; plus the modules that were imported.

    python -I fresh_process_load.py SAVED_MODEL_DIR TEXTS.json [--no-tensorflow-text]

With ``--each JSON`` in place of SAVED_MODEL_DIR (a list of SavedModel
directories, or of ``[directory, TEXTS.json or null, loaders, signatures,
tensorflow_text]`` items for texts of its own, only some loaders and signatures
(a loader left out costs its load and its first runs, seconds an export), or
false for an export to load before tensorflow_text is imported) it loads each in
turn in this one process and prints a list of those reports, one a directory
(the modules: what was imported up to it). tensorflow_text is imported before
the first item that needs it, so the items that load without it come first. The
session loader reads each into a graph of its own, so one export's functions
never stand in for another's.

`report` serves an export the same way in the process that imports this module
(a test's, where the export's self-containment is not in question).
"""

import importlib
import json
import sys


def _jsonable(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def main():
    path, texts_path = sys.argv[1], sys.argv[2]
    if path == "--each":
        paths, texts_path = json.loads(sys.argv[2]), sys.argv[3]
    import tensorflow as tf

    texts = _read_texts(texts_path)
    if path == "--each":
        reports = []
        for each in paths:
            if isinstance(each, str):
                each = [each, None]
            directory, own_texts, *served = each
            if served[2:] != [False]:
                importlib.import_module("tensorflow_text")  # registers its ops
            own = _read_texts(own_texts) if own_texts else texts
            reports.append(report(directory, own, *served[:2], tf=tf))
        json.dump(reports, sys.stdout)
    else:
        if "--no-tensorflow-text" not in sys.argv:
            importlib.import_module("tensorflow_text")
        json.dump(report(path, texts, tf=tf), sys.stdout)


def _read_texts(texts_path):
    with open(texts_path, encoding="utf-8") as handle:
        return [t.encode("utf-8") for t in json.load(handle)]


SIGNATURES = ("serving_default", "translate_nbest")
LOADERS = ("tf2", "session")


def report(path, texts, loaders=LOADERS, signatures=SIGNATURES, tf=None):
    """The outputs of the SavedModel at ``path`` for ``texts`` (bytes), by loader
    (of ``loaders``) and signature (of ``signatures``), and the modules imported
    so far (``tf``: the tensorflow module, imported when not given)."""
    if tf is None:
        import tensorflow as tf
    report = {}
    if "tf2" in loaders:
        loaded = tf.saved_model.load(path)
        report["tf2"] = {
            name: {
                k: _jsonable(v.numpy().tolist())
                for k, v in loaded.signatures[name](
                    text=tf.constant(texts, tf.string)
                ).items()
            }
            for name in signatures
        }
    if "session" in loaders:
        report["session"] = _session_report(tf, path, texts, signatures)

    report["modules"] = sorted(
        m
        for m in sys.modules
        if m.split(".")[0] in ("keras_selfattn", "keras", "tensorflow_text")
    )
    return report


def _session_report(tf, path, texts, signatures):
    """The session loader's outputs, each signature's, in a graph of its own."""
    report = {}
    with tf.compat.v1.Session(graph=tf.Graph()) as session:
        meta_graph = tf.compat.v1.saved_model.loader.load(session, ["serve"], path)
        for name in signatures:
            signature = meta_graph.signature_def[name]
            fetch = {k: v.name for k, v in signature.outputs.items()}
            out = session.run(fetch, {signature.inputs["text"].name: texts})
            report[name] = {k: _jsonable(v.tolist()) for k, v in out.items()}
    return report


if __name__ == "__main__":
    main()
