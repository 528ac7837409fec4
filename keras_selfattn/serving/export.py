"""Export a trained run as a SavedModel that TF Serving serves: text in, text out.

The SavedModel is written with `keras.export.ExportArchive`, which tracks the
Keras model's variables and, through ``track()``, the tokenizers' lookup tables, so
it runs under both loaders: TF2's `tf.saved_model.load` and the session-based
loader of ``saved_model_cli run`` and ``tensorflow_model_server``. (A Keras 3 model
held by a plain `tf.Module` passes the first and fails the second.)

Signatures (all graph code: normalization, tokenization, the encoder, the
``tf.while_loop`` searches of `keras_selfattn.decoding` and detokenization; no
PyFunc):

- ``serving_default``: ``text`` tf.string [B] -> ``translation`` tf.string [B] and
  ``score`` float32 [B] (greedy search; sum of the tokens' log-probabilities);
- ``translate_nbest``: ``text`` tf.string [B] -> ``translations`` tf.string [B, K]
  and ``scores`` float32 [B, K] (beam search, best first, length-normalized);
- ``serve``: ``source``, ``target_in`` int32 [B, T] token ids (0 = padding) ->
  ``logits`` float32 [B, T, target vocabulary] (the Keras model's own call).

Inputs are sanitized in the graph: invalid UTF-8 becomes U+FFFD, sources longer
than the model's ``max_source_len`` tokens are truncated, and a text with no
tokens translates to ``""`` with score 0 (as `Translator.translate` does).

On disk, ``BASE/N/`` (TF Serving's layout: only purely numeric folder names are
versions) holds ``saved_model.pb``, ``variables/``, ``assets/`` (the source and
target vocabularies, one token a line, line number = id; an id -> token table
over each is initialized at load, so a missing vocabulary fails the load) and
``assets.extra/tf_serving_warmup_requests``. The version is written into a
``.export-tmp-*`` folder inside BASE, which TF Serving ignores, and renamed into
place when complete: a server watching BASE never sees half a version, and a
failed export leaves no ``BASE/N``.
"""

import json
import os
import pathlib
import shlex
import shutil
import tempfile

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_MODEL_NAME",
    "NBEST_SIGNATURE",
    "SERVING_SIGNATURE",
    "TEMP_PREFIX",
    "TOKEN_IDS_SIGNATURE",
    "build_export_archive",
    "export_run",
    "export_translator",
    "list_versions",
    "next_version",
    "serving_functions",
    "serving_instructions",
]

DEFAULT_MODEL_NAME = "translator"
DEFAULT_BEAM_SIZE = 4
SERVING_SIGNATURE = "serving_default"
NBEST_SIGNATURE = "translate_nbest"
TOKEN_IDS_SIGNATURE = "serve"
TEMP_PREFIX = ".export-tmp-"
_NUM_WARMUP_TEXTS = 8


def list_versions(export_base):
    """The version numbers present in ``export_base`` (folders named by an integer), sorted."""
    export_base = pathlib.Path(export_base)
    if not export_base.is_dir():
        return []
    return sorted(
        int(p.name) for p in export_base.iterdir() if p.name.isdigit() and p.is_dir()
    )


def next_version(export_base):
    """One more than the highest version in ``export_base``; 1 for a new or empty base."""
    versions = list_versions(export_base)
    return versions[-1] + 1 if versions else 1


def serving_functions(translator, beam_size=DEFAULT_BEAM_SIZE, alpha=0.6):
    """The graph functions the SavedModel serves, with their input signatures.

    Args:
        translator: a `keras_selfattn.inference.Translator` (model, tokenizer, limits).
        beam_size: hypotheses returned by ``translate_nbest``.
        alpha: beam search length-normalization strength (as `Translator.translate`).

    Returns:
        dict signature name -> ``(function, input_signature)``, ``serving_default``
        first.
    """
    import tensorflow as tf

    from keras_selfattn.decoding import PAD_ID, beam_search_decode, greedy_decode

    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(
            f"beam_size must be a positive integer. Received: beam_size={beam_size!r}"
        )
    model, tokenizer = translator.model, translator.tokenizer
    max_source_len, max_len = translator.max_source_len, translator.max_target_len + 1
    text_spec = [tf.TensorSpec([None], tf.string, name="text")]

    def encode(text):
        """Like `Translator.encode_sources`: (B, T) int32 ids (T >= 1) and token counts."""
        text = tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )
        ids = tokenizer.source.encode(text)
        lengths = ids.row_lengths()
        ids = ids[:, :max_source_len].to_tensor(default_value=PAD_ID)
        ids = tf.pad(
            ids, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(ids)[1])]]
        )  # keep one column
        return tf.cast(ids, tf.int32), tf.equal(lengths, 0)

    def translate(text):
        ids, no_tokens = encode(text)
        out = greedy_decode(model, ids, max_len)
        translation = tokenizer.target.decode(out["ids"])
        return {
            "translation": tf.where(no_tokens, tf.constant(""), translation),
            "score": tf.where(no_tokens, tf.constant(0.0), out["scores"]),
        }

    def translate_nbest(text):
        ids, no_tokens = encode(text)
        out = beam_search_decode(model, ids, beam_size, max_len, alpha=alpha)
        shape = tf.shape(out["ids"])  # (B, K, L); an explicit shape: B may be 0
        flat = tf.reshape(out["ids"], [shape[0] * beam_size, shape[2]])
        translations = tf.reshape(tokenizer.target.decode(flat), [shape[0], beam_size])
        return {
            "translations": tf.where(no_tokens[:, None], tf.constant(""), translations),
            "scores": tf.where(no_tokens[:, None], tf.constant(0.0), out["scores"]),
        }

    def serve(source, target_in):
        logits = model({"source": source, "target_in": target_in}, training=False)
        return {"logits": tf.cast(logits, tf.float32)}

    return {
        SERVING_SIGNATURE: (translate, text_spec),
        NBEST_SIGNATURE: (translate_nbest, text_spec),
        TOKEN_IDS_SIGNATURE: (
            serve,
            [
                tf.TensorSpec([None, None], tf.int32, name="source"),
                tf.TensorSpec([None, None], tf.int32, name="target_in"),
            ],
        ),
    }


def _vocabulary_tables(tokenizer, directory):
    """A `tf.Module` with an id -> token table over each vocabulary file (the SavedModel's assets)."""
    import tensorflow as tf

    from keras_selfattn.text.pair_tokenizer import SOURCE_VOCAB_FILE, TARGET_VOCAB_FILE
    from keras_selfattn.text.vocab import UNK_TOKEN

    module = tf.Module(name="vocabulary_files")
    for side, filename in (
        ("source", SOURCE_VOCAB_FILE),
        ("target", TARGET_VOCAB_FILE),
    ):
        path = getattr(tokenizer, side).vocabulary.save(
            pathlib.Path(directory) / filename
        )
        initializer = tf.lookup.TextFileInitializer(
            tf.saved_model.Asset(str(path)),
            key_dtype=tf.int64,
            key_index=tf.lookup.TextFileIndex.LINE_NUMBER,
            value_dtype=tf.string,
            value_index=tf.lookup.TextFileIndex.WHOLE_LINE,
        )
        setattr(
            module,
            f"{side}_id_to_token",
            tf.lookup.StaticHashTable(initializer, UNK_TOKEN),
        )
    return module


def build_export_archive(
    translator, beam_size=DEFAULT_BEAM_SIZE, alpha=0.6, asset_dir=None
):
    """A `keras.export.ExportArchive` with the model, its tokenizers and the signatures.

    Add your own endpoints with ``archive.add_endpoint`` before ``write_out``.

    Args:
        translator: a `keras_selfattn.inference.Translator`.
        beam_size: hypotheses returned by ``translate_nbest``.
        alpha: beam search length normalization.
        asset_dir: a folder for the vocabulary files that become ``assets/``
            (copied at ``write_out``; keep it until then). None: no vocabulary assets.

    Returns:
        The `keras.export.ExportArchive`.
    """
    import keras

    archive = keras.export.ExportArchive()
    archive.track(translator.model)
    archive.track(translator.tokenizer)  # its lookup tables (tf.Module resources)
    if asset_dir is not None:
        archive.track(_vocabulary_tables(translator.tokenizer, asset_dir))
    for name, (function, input_signature) in serving_functions(
        translator, beam_size, alpha
    ).items():
        archive.add_endpoint(name, function, input_signature)
    return archive


def _check_signatures(saved_model_dir):
    """Fails early (before publishing) on a signature TF Serving users would trip on."""
    from tensorflow.core.protobuf import saved_model_pb2

    from keras_selfattn.serving.audit import PYTHON_BOUND_OPS, list_op_types

    python_ops = sorted(set(list_op_types(saved_model_dir)) & PYTHON_BOUND_OPS)
    if python_ops:
        raise RuntimeError(
            f"The exported graph calls back into Python ({', '.join(python_ops)}); TF Serving cannot run it"
        )
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(
        (pathlib.Path(saved_model_dir) / "saved_model.pb").read_bytes()
    )
    signatures = saved_model.meta_graphs[0].signature_def
    default = signatures[SERVING_SIGNATURE]
    found = (
        {k: v.dtype for k, v in default.inputs.items()},
        {k: v.dtype for k, v in default.outputs.items()},
    )
    expected = (
        {"text": 7},
        {"translation": 7, "score": 1},
    )  # DT_STRING = 7, DT_FLOAT = 1
    if found != expected:
        raise RuntimeError(
            f"serving_default has inputs/outputs {found}, expected {expected}"
        )
    for name, signature in signatures.items():
        for output in signature.outputs:
            if output.endswith("_bytes"):
                raise RuntimeError(
                    f"Output {name}/{output} ends in _bytes: TF Serving's REST API would base64 it"
                )


def _fsync_tree(root):
    """Flushes every file and folder under ``root`` to disk (the rename then publishes complete files)."""
    for folder, _, files in os.walk(root):
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                os.fsync(handle.fileno())
        descriptor = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _publish(staged_dir, export_base, version, auto_version):
    """Renames ``staged_dir`` to ``export_base/version`` atomically; with an automatic
    version, retries with the next free number if another export took this one."""
    for _ in range(100):
        target = export_base / str(version)
        try:
            if target.exists():
                raise FileExistsError(target)
            os.rename(
                staged_dir, target
            )  # atomic on one filesystem; fails on a non-empty target
            return target
        except OSError:
            if not auto_version or not target.exists():
                raise
            version = next_version(export_base)
    raise RuntimeError(f"Could not find a free version number in {export_base}")


def export_translator(
    translator,
    export_base,
    version=None,
    *,
    model_name=DEFAULT_MODEL_NAME,
    beam_size=DEFAULT_BEAM_SIZE,
    alpha=0.6,
    warmup_texts=("1 janvier 2000",),
):
    """Writes ``export_base/N/``: a SavedModel with warmup records, published atomically.

    Args:
        translator: a `keras_selfattn.inference.Translator`.
        export_base: the model's base folder (what TF Serving's ``--model_base_path``
            or ``/models/NAME`` points at); created if missing.
        version: the version number N; None: one more than the highest present.
            An existing version is never overwritten.
        model_name: the served name, written into the warmup requests.
        beam_size: hypotheses returned by ``translate_nbest``.
        alpha: beam search length normalization.
        warmup_texts: sample sentences for ``assets.extra/tf_serving_warmup_requests``.

    Returns:
        The version folder, a `pathlib.Path`.

    Raises:
        FileExistsError: ``version`` is given and ``export_base/version`` exists.
    """
    import numpy as np

    from keras_selfattn.decoding import START_ID
    from keras_selfattn.serving import warmup

    export_base = pathlib.Path(export_base)
    auto_version = version is None
    if auto_version:
        version = next_version(export_base)
    elif not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(
            f"version must be a non-negative integer. Received: version={version!r}"
        )
    if (export_base / str(version)).exists():
        raise FileExistsError(
            f"{export_base / str(version)} exists; versions are never overwritten"
        )
    export_base.mkdir(parents=True, exist_ok=True)

    temp_dir = pathlib.Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=export_base))
    try:
        saved_model_dir = temp_dir / "saved_model"
        staging = (
            temp_dir / "staging"
        )  # the vocabulary files, copied into assets/ by the saver
        archive = build_export_archive(translator, beam_size, alpha, asset_dir=staging)
        archive.write_out(str(saved_model_dir), verbose=False)
        _check_signatures(saved_model_dir)
        texts = [
            t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t)
            for t in warmup_texts
        ]
        source_ids = translator.encode_sources(texts[:1])[0].numpy()
        target_in = np.full(
            [len(source_ids), 1], START_ID, np.int32
        )  # the first decoder step
        logs = warmup.warmup_requests_for_translation(
            texts,
            model_name,
            signatures=(SERVING_SIGNATURE, NBEST_SIGNATURE),
            token_ids=(
                TOKEN_IDS_SIGNATURE,
                {"source": source_ids, "target_in": target_in},
            ),
        )
        warmup.write_warmup_requests(saved_model_dir, logs)
        _fsync_tree(saved_model_dir)
        # Publish the SavedModel folder itself; the rest of temp_dir is removed below.
        published = _publish(saved_model_dir, export_base, version, auto_version)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    descriptor = os.open(export_base, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    return published


def _sample_sources(run_dir, count=_NUM_WARMUP_TEXTS):
    """A few source sentences of the run's held-out split (for warmup), if it has one."""
    from keras_selfattn.text import read_pairs
    from keras_selfattn.training.train import SPLITS_DIR

    for name in ("test", "validation", "train"):
        path = pathlib.Path(run_dir) / SPLITS_DIR / f"{name}.tsv"
        if path.is_file():
            sources = [source for source, _ in read_pairs(path)[:count]]
            if sources:
                return sources
    return ["1 janvier 2000"]


def export_run(
    run_dir,
    export_base,
    version=None,
    *,
    model_name=DEFAULT_MODEL_NAME,
    beam_size=DEFAULT_BEAM_SIZE,
    alpha=0.6,
    warmup_texts=None,
):
    """Exports a trained run directory (``keras-selfattn export``) as ``export_base/N/``.

    Loads ``model.keras``, the vocabularies and ``config.json`` as
    `keras_selfattn.inference.Translator.load` does (so the SavedModel translates
    exactly like ``keras-selfattn translate``), then calls `export_translator`.

    Args:
        run_dir: a run directory written by `keras_selfattn.training.train`.
        export_base: the model's base folder; versions go in numbered subfolders.
        version: N; None: one more than the highest present.
        model_name: the served name (warmup requests; the ``docker run`` line).
        beam_size: hypotheses returned by ``translate_nbest``.
        alpha: beam search length normalization.
        warmup_texts: sample sentences for the warmup records (default: the first
            sources of the run's held-out split).

    Returns:
        The version folder, a `pathlib.Path`.

    Example:

        version_dir = export_run("runs/demo", "exports/translator")   # exports/translator/1
    """
    from keras_selfattn.inference import Translator

    translator = Translator.load(run_dir)
    if warmup_texts is None:
        warmup_texts = _sample_sources(run_dir)
    return export_translator(
        translator,
        export_base,
        version,
        model_name=model_name,
        beam_size=beam_size,
        alpha=alpha,
        warmup_texts=warmup_texts,
    )


def serving_instructions(
    export_base,
    model_name=DEFAULT_MODEL_NAME,
    sample_text="14 juillet 1989",
    rest_port=8501,
    grpc_port=8500,
):
    """The ``docker run`` line that serves ``export_base`` and ``curl`` lines that query it.

    Args:
        export_base: the model's base folder (holding the version folders).
        model_name: the served name (``MODEL_NAME``; the REST path).
        sample_text: the sentence in the example request.
        rest_port, grpc_port: host ports.

    Returns:
        A multi-line string of shell commands.
    """
    source = pathlib.Path(export_base).resolve()
    mount = f"type=bind,source={source},target=/models/{model_name}"
    body = json.dumps({"instances": [sample_text]}, ensure_ascii=False)
    nbest = json.dumps(
        {"signature_name": NBEST_SIGNATURE, "inputs": {"text": [sample_text]}},
        ensure_ascii=False,
    )
    url = f"http://localhost:{rest_port}/v1/models/{model_name}"
    return "\n".join(
        [
            "# serve (REST on port 8501, gRPC on port 8500):",
            (
                f"docker run -p {grpc_port}:8500 -p {rest_port}:8501 --mount {shlex.quote(mount)} "
                f"-e MODEL_NAME={shlex.quote(model_name)} -t tensorflow/serving"
            ),
            "# query:",
            f"curl -s {url}",
            f"curl -s -X POST {url}:predict -H 'Content-Type: application/json' -d {shlex.quote(body)}",
            f"curl -s -X POST {url}:predict -H 'Content-Type: application/json' -d {shlex.quote(nbest)}",
        ]
    )
