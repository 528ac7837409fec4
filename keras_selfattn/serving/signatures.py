"""The graph code of the exported signatures: text in, text out, all in TensorFlow.

Signatures (normalization, tokenization, the encoder, the ``tf.while_loop``
searches of `keras_selfattn.decoding` and detokenization; no PyFunc):

- ``serving_default``: ``text`` tf.string [B] -> ``translation`` tf.string [B] and
  ``score`` float32 [B] (greedy search; sum of the tokens' log-probabilities);
- ``translate_nbest``: ``text`` tf.string [B] -> ``translations`` tf.string [B, K]
  and ``scores`` float32 [B, K] (beam search, best first, length-normalized);
- ``serve``: ``source``, ``target_in`` int32 [B, T] token ids (0 = padding) ->
  ``logits`` float32 [B, T, target vocabulary] (the Keras model's own call).

Requests are checked IN THE GRAPH. TF Serving does not check a request's shape
against the signature (tensorflow/serving#1436), and a rank-0 ``text`` crashed the
process (SIGSEGV), shape [2, 0] aborted it (SIGABRT). So every input goes through
an ``EnsureShape`` op first (a plain ``tf.rank`` would be folded to a constant,
since the signature declares the rank): a wrong rank answers InvalidArgument
before any other op runs. ``serve`` also checks that ``source`` and ``target_in``
have the same batch, that ``source`` has at least one column, and that every id is
in its vocabulary.

Content is sanitized: invalid UTF-8 becomes U+FFFD, sources longer than the
model's ``max_source_len`` tokens are truncated, and a text with no tokens
translates to ``""`` with score 0 (as `Translator.translate` does).

The SavedModel is written with `keras.export.ExportArchive`, which tracks the
Keras model's variables and, through ``track()``, the tokenizers' lookup tables, so
it runs under both loaders: TF2's `tf.saved_model.load` and the session-based
loader of ``saved_model_cli run`` and ``tensorflow_model_server``. (A Keras 3 model
held by a plain `tf.Module` passes the first and fails the second.)
"""

import contextlib
import functools
import pathlib

from keras_selfattn.choices import DEFAULT_GROUPS  # re-exported
from keras_selfattn.decoding import (  # DEFAULT_BEAM_SIZE: re-exported
    DEFAULT_BEAM_SIZE,
    search_with,
)
from keras_selfattn.decoding.once import weights_as_constants

__all__ = [
    "DEFAULT_BEAM_SIZE",
    "DEFAULT_GROUPS",
    "NBEST_SIGNATURE",
    "SERVING_SIGNATURE",
    "TOKEN_IDS_SIGNATURE",
    "build_export_archive",
    "check_signatures",
    "in_length_groups",
    "serving_functions",
]

SERVING_SIGNATURE = "serving_default"
NBEST_SIGNATURE = "translate_nbest"
TOKEN_IDS_SIGNATURE = "serve"


def _checked(tensor, shape):
    """``tensor`` after a run-time check that its shape fits ``shape``.

    ``EnsureShape`` fails the request with InvalidArgument ("Shape of tensor ... [] is
    not compatible with expected shape [?]") before any consumer runs.
    """
    import tensorflow as tf

    return tf.ensure_shape(tensor, shape)


# Long: three small signature closures over one translator and its settings.
def serving_functions(translator, xla=False, groups=DEFAULT_GROUPS):
    """The graph functions the SavedModel serves, with their input signatures.

    Args:
        translator: a `keras_selfattn.translation.Translator` (model, tokenizer,
            limits, and its `SearchSettings`: ``serving_default`` searches
            greedily and ``translate_nbest`` by a beam of its ``beam_size``,
            both with its length penalty, ``max_length_ratio``, shortlist,
            precision and int8 weights).
        xla: compile each search (encoder and decoding loop, ids in and out) with
            XLA (``jit_compile=True``; the loop in stages of fewer and fewer rows,
            `keras_selfattn.decoding`; the text ops stay outside). OFF by default:
            ``tensorflow_model_server`` runs such a graph on CPU only when started
            with ``--xla_cpu_compilation_enabled=true`` (marked experimental), and
            fails its first request without it (`keras_selfattn.serving.audit`
            reports the flag).
        groups: each request's sentences are sorted by source length and
            searched as this many independent groups (`in_length_groups`): the
            graph executor runs them at once on separate cores, and short
            sources are not padded to the request's longest. 1: one search over
            the whole request.

    Returns:
        dict signature name -> ``(function, input_signature)``, ``serving_default``
        first.
    """
    import tensorflow as tf

    if not isinstance(groups, int) or isinstance(groups, bool) or groups < 1:
        raise ValueError(
            f"groups must be a positive integer. Received: groups={groups!r}"
        )
    model, tokenizer = translator.model, translator.tokenizer
    max_source_len, max_len = translator.max_source_len, translator.max_target_len + 1
    settings, beam_size = translator.settings, translator.settings.beam_size
    text_spec = [tf.TensorSpec([None], tf.string, name="text")]
    output = translator.search_output(bucketed=xla)

    def searcher(search):
        chosen = settings.replace(search=search)
        return lambda ids: search_with(
            model, ids, chosen, max_len, output=output, jit_compile=xla
        )

    greedy, beam = searcher("greedy"), searcher("beam")

    def search(function, ids):
        bucket = functools.partial(_bucketed, max_source_len=max_source_len)
        return in_length_groups(function, ids, groups, bucket if xla else None)

    def translate(text):
        ids, no_tokens = _source_ids(text, tokenizer, max_source_len)
        with _weights_held(translator):
            out = search(greedy, ids)
        translation = tokenizer.target.decode(out["ids"])
        return {
            "translation": tf.where(no_tokens, tf.constant(""), translation),
            "score": tf.where(no_tokens, tf.constant(0.0), out["scores"]),
        }

    def translate_nbest(text):
        ids, no_tokens = _source_ids(text, tokenizer, max_source_len)
        with _weights_held(translator):
            out = search(beam, ids)
        shape = tf.shape(out["ids"])  # (B, K, L); an explicit shape: B may be 0
        flat = tf.reshape(out["ids"], [shape[0] * beam_size, shape[2]])
        translations = tf.reshape(tokenizer.target.decode(flat), [shape[0], beam_size])
        return {
            "translations": tf.where(no_tokens[:, None], tf.constant(""), translations),
            "scores": tf.where(no_tokens[:, None], tf.constant(0.0), out["scores"]),
        }

    def serve(source, target_in):
        source, target_in = _checked_token_ids(source, target_in, tokenizer)
        with _weights_held(translator):
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


@contextlib.contextmanager
def _weights_held(translator):
    """The weights as a served graph reads them: int8 ones dequantized per request
    (`Translator.weights_held`), cast ones as constants (`weights_as_constants`)."""
    with translator.weights_held(), weights_as_constants():
        yield


# With ``xla``, source ids are padded to a multiple of this many columns (at most
# max_source_len), so that XLA compiles one program per batch size and length
# bucket, not one per length.
XLA_SOURCE_BUCKET = 16


def _source_ids(text, tokenizer, max_source_len):
    """The checked batch -> (B, T) int32 ids (T >= 1) and which texts have no token."""
    import tensorflow as tf

    from keras_selfattn.translation import source_ids_for_model

    text = _checked(text, [None])
    text = tf.strings.unicode_transcode(
        text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
    )
    ids, lengths = source_ids_for_model(tokenizer.source.encode(text), max_source_len)
    return ids, tf.equal(lengths, 0)


def _bucketed(ids, max_source_len):
    """``ids`` with T padded up to a multiple of `XLA_SOURCE_BUCKET` (capped at
    ``max_source_len``; the model's positions end there). Padding is masked, so
    the translations do not change."""
    import tensorflow as tf

    width = tf.shape(ids)[1]
    bucket = tf.minimum(
        (width + XLA_SOURCE_BUCKET - 1) // XLA_SOURCE_BUCKET * XLA_SOURCE_BUCKET,
        tf.maximum(width, max_source_len),
    )
    return tf.pad(ids, [[0, 0], [0, bucket - width]])


def in_length_groups(search, source_ids, groups, pad_width=None):
    """``search(source_ids)`` as ``groups`` searches over length-sorted rows.

    The rows are sorted by source length (stable) and cut into ``groups`` runs
    of consecutive rows, each trimmed to its own longest source; each run is
    searched on its own, and the results are put back in the input order. The
    searches share no tensor, so TensorFlow's executor runs their loops at once
    (its inter-op threads: one core each), and a run of short sources is not
    padded to the batch's longest. A row's arithmetic is its own: the tokens are
    those of one search over the batch, the scores equal to float rounding
    (benchmarks/RESULTS.md, the served translator).

    Args:
        search: ``ids -> dict`` of batch-major tensors (`greedy_decode`'s or
            `beam_search_decode`'s result); its ``ids`` may differ in their last
            axis (the steps taken) from run to run: they are padded with 0.
        source_ids: int32 (B, T) source ids, 0-padded at the end of each row.
        groups: int >= 1, the number of runs (1: ``search(source_ids)``).
            A batch of fewer rows leaves some runs empty; those are not searched.
        pad_width: None, or ``ids -> ids`` applied to each run's trimmed ids
            (the XLA export pads them to a few widths).

    Returns:
        ``search``'s dict over the whole batch, rows in the input order.
    """
    import tensorflow as tf

    if groups == 1:
        return search(source_ids if pad_width is None else pad_width(source_ids))
    lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, 0), tf.int32), axis=1)
    order = tf.argsort(lengths, stable=True)
    ids, lengths = tf.gather(source_ids, order), tf.gather(lengths, order)
    batch = tf.shape(ids)[0]
    edges = [batch * group // groups for group in range(groups + 1)]

    def searched(group):
        rows = slice(edges[group], edges[group + 1])
        width = tf.reduce_max(tf.concat([lengths[rows], [1]], axis=0))
        run = ids[rows, :width]
        return search(run if pad_width is None else pad_width(run))

    last = searched(groups - 1)  # the last run is empty only when the batch is
    results = [
        tf.cond(
            edges[group + 1] > edges[group],  # an empty run is not searched
            lambda group=group: searched(group),
            lambda: _no_rows_like(last),
        )
        for group in range(groups - 1)
    ] + [last]
    steps = tf.reduce_max(tf.stack([tf.shape(r["ids"])[-1] for r in results]))
    inverse = tf.math.invert_permutation(order)
    merged = {}
    for key in results[0]:
        values = [r[key] for r in results]
        if key == "ids":
            values = [_pad_last_axis(v, steps) for v in values]
        merged[key] = tf.gather(tf.concat(values, axis=0), inverse)
    return merged


def _no_rows_like(results):
    """Zeros of no row shaped as ``results`` (a search's dict) from their static
    shapes, unknown sizes read at run time (ids' last axis, the steps: 0)."""
    import tensorflow as tf

    empty = {}
    for key, value in results.items():
        shape = [0]
        for axis, size in enumerate(value.shape[1:], start=1):
            if size is None and key == "ids" and axis == value.shape.rank - 1:
                size = 0
            shape.append(tf.shape(value)[axis] if size is None else size)
        empty[key] = tf.zeros(tf.stack(shape), value.dtype)
    return empty


def _pad_last_axis(tensor, size):
    """``tensor`` padded with zeros at the end of its last axis to ``size``."""
    import tensorflow as tf

    pad = [[0, 0]] * (tensor.shape.rank - 1) + [[0, size - tf.shape(tensor)[-1]]]
    return tf.pad(tensor, pad)


def _checked_token_ids(source, target_in, tokenizer):
    """``source`` and ``target_in`` after run-time checks of shape, batch and ids."""
    import tensorflow as tf

    source, target_in = (
        _checked(source, [None, None]),
        _checked(target_in, [None, None]),
    )
    checks = [
        tf.debugging.assert_equal(
            tf.shape(source)[0],
            tf.shape(target_in)[0],
            message="source and target_in must have the same batch size",
        ),
        tf.debugging.assert_positive(
            tf.shape(source)[1], message="source must have at least one column"
        ),
    ]
    for name, ids, size in (
        ("source", source, tokenizer.source_vocab_size),
        ("target_in", target_in, tokenizer.target_vocab_size),
    ):
        checks.append(
            tf.debugging.assert_non_negative(ids, message=f"{name} holds a negative id")
        )
        checks.append(
            tf.debugging.assert_less(
                ids,
                tf.constant(size, tf.int32),
                message=f"{name} holds an id outside its vocabulary of {size}",
            )
        )
    with tf.control_dependencies(checks):
        return tf.identity(source), tf.identity(target_in)


def _vocabulary_tables(tokenizer, directory):
    """A `tf.Module` with an id -> token table per vocabulary file (the assets)."""
    import tensorflow as tf

    from keras_selfattn.run_directory.layout import SOURCE_VOCAB_FILE, TARGET_VOCAB_FILE
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


def build_export_archive(translator, asset_dir=None, xla=False, groups=DEFAULT_GROUPS):
    """A `keras.export.ExportArchive` with the model, its tokenizers and the signatures.

    Add your own endpoints with ``archive.add_endpoint`` before ``write_out``.

    Args:
        translator: a `keras_selfattn.translation.Translator`; the signatures
            search with its `SearchSettings` (`serving_functions`).
        asset_dir: a folder for the vocabulary files that become ``assets/``
            (copied at ``write_out``; keep it until then). None: no vocabulary assets.
        xla: compile the searches with XLA (see `serving_functions`; needs
            ``--xla_cpu_compilation_enabled=true`` on a CPU model server).
        groups: length groups searched at once per request (`serving_functions`).

    Returns:
        The `keras.export.ExportArchive`.
    """
    import keras

    archive = keras.export.ExportArchive()
    int8_weights = translator.int8_weights
    if int8_weights is None:
        archive.track(translator.model)
    else:  # the int8 kernels in place of the model's float32 ones; the other
        # variables are tracked as the endpoints read them
        archive.track(int8_weights)
    archive.track(translator.tokenizer)  # its lookup tables (tf.Module resources)
    if asset_dir is not None:
        archive.track(_vocabulary_tables(translator.tokenizer, asset_dir))
    for name, (function, input_signature) in serving_functions(
        translator, xla, groups
    ).items():
        archive.add_endpoint(name, function, input_signature)
    _trace_endpoints_once(archive)
    return archive


def _trace_endpoints_once(archive):
    """Makes ``archive.write_out`` trace each endpoint once, not twice.

    ``write_out`` traces the endpoints to list their variables, then
    ``tf.saved_model.save`` traces them again: a function's traces are keyed by
    their context, and the save context (its variable policy) is part of the
    key. The searches are most of an export's time, so the first trace is done
    in a save context with the default options, the one ``write_out`` saves
    under: the save then finds it. Where Keras lacks the method this relies on,
    the archive is left as it is (two traces, the same SavedModel).
    """
    import tensorflow as tf
    from tensorflow.python.saved_model import save_context

    list_and_track = getattr(archive, "_filter_and_track_resources", None)
    if list_and_track is None:
        return

    def list_and_track_as_saved():
        if save_context.in_save_context():
            return list_and_track()
        with save_context.save_context(tf.saved_model.SaveOptions()):
            return list_and_track()

    archive._filter_and_track_resources = list_and_track_as_saved


def check_signatures(saved_model_dir):
    """Fails early (before publishing) on a signature TF Serving users would trip on.

    Args:
        saved_model_dir: a written SavedModel directory.

    Raises:
        RuntimeError: the graph calls back into Python, ``serving_default`` does not
            take ``text`` and answer ``translation`` and ``score``, or an output
            name ends in ``_bytes`` (TF Serving's REST API would base64 it).
    """
    from keras_selfattn.serving.op_tables import PYTHON_BOUND_OPS
    from keras_selfattn.serving.saved_model_graph import (
        list_op_types,
        read_saved_model,
    )

    saved_model = read_saved_model(saved_model_dir)
    python_ops = sorted(set(list_op_types(saved_model)) & PYTHON_BOUND_OPS)
    if python_ops:
        raise RuntimeError(
            f"The exported graph calls back into Python ({', '.join(python_ops)}); TF "
            "Serving cannot run it"
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
                    f"Output {name}/{output} ends in _bytes: TF Serving's REST API "
                    "would base64 it"
                )
