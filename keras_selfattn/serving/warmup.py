"""TF Serving warmup records: ``assets.extra/tf_serving_warmup_requests``.

TF Serving replays these requests when it loads a version, before it marks the
version AVAILABLE, so the first real request does not pay for graph
initialization. The file is a TFRecord of ``tensorflow.serving.PredictionLog``
protos (at most 1000 are read), built with tensorflow-serving-api and written
with `tf.io.TFRecordWriter`.

The same records drive `keras_selfattn.serving.check_serving`, which replays them,
the `bad_request_batches` (odd content) and the `malformed_inputs` (shapes the
signature does not declare, which TF Serving passes through unchecked) under the
session-based loader.
"""

import pathlib

from keras_selfattn.serving.publishing import DEFAULT_MODEL_NAME

__all__ = [
    "MAX_WARMUP_RECORDS",
    "WARMUP_FILE",
    "bad_request_batches",
    "batches_of_sizes",
    "make_predict_request",
    "malformed_inputs",
    "read_warmup_requests",
    "warmup_requests_for_translation",
    "write_warmup_requests",
]

WARMUP_FILE = pathlib.Path("assets.extra") / "tf_serving_warmup_requests"
MAX_WARMUP_RECORDS = 1000


def _to_bytes(text):
    return text if isinstance(text, bytes) else str(text).encode("utf-8")


def bad_request_batches():
    """Requests a translation signature must answer without crash or hang.

    Returns:
        dict name -> list of bytes (one batch each): an empty batch, empty and
        blank strings, invalid UTF-8, a 10,000-character and a 200,000-character
        sentence (many tokens, truncated to the model's maximum source length), a
        10,000-character word,
        only unknown words, and one batch mixing all of them.
    """
    batches = {
        "empty_batch": [],
        "empty_strings": [b"", b" ", b"\t\n"],
        "invalid_utf8": [b"\xff\xfe\xfd", b"12 \xc3\x28 mars \x80 2001"],
        "long_sentence": [("14 juillet 1989 " * 700)[:10_000].encode("utf-8")],
        "very_long_sentence": [("3 mars 2001 " * 18_182)[:200_000].encode("utf-8")],
        "long_word": [b"x" * 10_000],
        "unknown_words": [b"qwxz vbnmk plokij", "ÿ ŉ ǅ ꙮ".encode()],
    }
    batches["mixed"] = [text for name, batch in batches.items() for text in batch]
    return batches


def malformed_inputs(rank, dtype="string"):
    """Inputs of a shape a signature input of ``rank`` does not declare.

    TF Serving does not check a request's shape against the signature
    (tensorflow/serving#1436): such inputs reach the graph, which must answer
    InvalidArgument rather than crash the server or answer for the wrong batch.

    Args:
        rank: the input's declared rank (e.g. 1 for ``text`` [B]).
        dtype: ``"string"`` or a NumPy number type name (``"int32"``).

    Returns:
        dict name -> `numpy.ndarray`: a scalar (rank 0; a bare string instead of a
        list), one rank too many with an empty and a non-empty last axis (for
        ``text``: shapes [2, 0] and [1, 2]), and for rank 2 or more, one rank too few.

    Example:

    >>> {name: value.shape for name, value in malformed_inputs(1).items()}
    {'rank_0': (), 'shape_2x0': (2, 0), 'shape_1x2': (1, 2)}
    """
    import numpy as np

    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise ValueError(f"rank must be a positive integer. Received: rank={rank!r}")

    def filled(shape):
        if dtype == "string":
            return np.full(shape, b"14 juillet 1989", dtype=object)
        return np.zeros(shape, dtype=dtype)

    inputs = {
        "rank_0": filled([]),
        f"shape_{'x'.join(['2'] * rank)}x0": filled([2] * rank + [0]),
        f"shape_{'x'.join(['1'] * rank)}x2": filled([1] * rank + [2]),
    }
    if rank >= 2:
        inputs[f"rank_{rank - 1}"] = filled([2] * (rank - 1))
    return inputs


def make_predict_request(
    inputs, signature_name="serving_default", model_name=DEFAULT_MODEL_NAME
):
    """A ``PredictRequest`` from ``{input name: array-like}``.

    Args:
        inputs: dict input name -> value (`tf.make_tensor_proto` converts it; a
            list of bytes/str becomes a ``DT_STRING`` tensor).
        signature_name: the signature to call.
        model_name: ``model_spec.name`` (TF Serving's warmup ignores it; REST and
            gRPC requests must name the served model).

    Returns:
        A ``tensorflow_serving.apis.predict_pb2.PredictRequest``.
    """
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    request.model_spec.signature_name = signature_name
    for name, value in inputs.items():
        if isinstance(value, (list, tuple)) and all(
            isinstance(v, (str, bytes)) for v in value
        ):
            proto = tf.make_tensor_proto(
                [_to_bytes(v) for v in value], dtype=tf.string, shape=[len(value)]
            )
        else:
            proto = tf.make_tensor_proto(value)
        request.inputs[name].CopyFrom(proto)
    return request


def warmup_requests_for_translation(
    texts,
    model_name=DEFAULT_MODEL_NAME,
    signatures=("serving_default",),
    token_ids=None,
    batch_sizes=None,
):
    """``PredictionLog`` records for the translation signatures (and the token-id one).

    One record per signature with the first text alone, and one with every text,
    so both a single sentence and a batch are warm. With ``batch_sizes``, one
    record per signature and size instead (see `batches_of_sizes`).

    Args:
        texts: sample source sentences (str or bytes), at least one.
        model_name: the served model's name.
        signatures: names of signatures taking ``text`` (tf.string [None]).
        token_ids: optional ``(signature_name, {"source": ids, "target_in": ids})``
            for the token-id endpoint.
        batch_sizes: optional request sizes to warm, positive ints.

    Returns:
        list of ``tensorflow_serving.apis.prediction_log_pb2.PredictionLog``.
    """
    from tensorflow_serving.apis import prediction_log_pb2

    texts = [_to_bytes(t) for t in texts]
    if not texts:
        raise ValueError("warmup needs at least one sample text. Received: texts=[]")
    if batch_sizes is None:
        batches = [texts[:1]] + ([texts] if len(texts) > 1 else [])
    else:
        batches = batches_of_sizes(texts, batch_sizes)
    logs = []
    for signature in signatures:
        for batch in batches:
            request = make_predict_request({"text": batch}, signature, model_name)
            logs.append(
                prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request)
                )
            )
    if token_ids is not None:
        signature, inputs = token_ids
        request = make_predict_request(inputs, signature, model_name)
        logs.append(
            prediction_log_pb2.PredictionLog(
                predict_log=prediction_log_pb2.PredictLog(request=request)
            )
        )
    return logs


def batches_of_sizes(texts, batch_sizes):
    """One batch of each size in ``batch_sizes``, for an export whose searches
    compile per batch size and source length (``xla=True``).

    Each batch cycles through ``texts``, then through pairs of them joined by a
    space, so that the larger batches reach longer sources too (the XLA export
    pads sources to multiples of 16 tokens and compiles once for each).

    Args:
        texts: sample source sentences (bytes), at least one.
        batch_sizes: positive ints, the request sizes (TF Serving's
            ``allowed_batch_sizes`` when it batches).

    Returns:
        list of lists of bytes, one a size.
    """
    sizes = list(batch_sizes)
    if not sizes or not all(
        isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in sizes
    ):
        raise ValueError(
            f"batch_sizes must be positive ints. Received: batch_sizes={batch_sizes!r}"
        )
    pairs = [a + b" " + b for a, b in zip(texts[0::2], texts[1::2])]
    pool = texts + pairs
    return [[pool[i % len(pool)] for i in range(n)] for n in sizes]


def write_warmup_requests(saved_model_dir, logs):
    """Writes ``assets.extra/tf_serving_warmup_requests`` into a SavedModel directory.

    Args:
        saved_model_dir: the (not yet published) version directory.
        logs: ``PredictionLog`` protos, at most `MAX_WARMUP_RECORDS`.

    Returns:
        The path written.
    """
    import tensorflow as tf

    logs = list(logs)
    if not logs or len(logs) > MAX_WARMUP_RECORDS:
        raise ValueError(
            f"TF Serving reads 1 to {MAX_WARMUP_RECORDS} warmup records. Received: "
            f"{len(logs)} records"
        )
    path = pathlib.Path(saved_model_dir) / WARMUP_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(path)) as writer:
        for log in logs:
            writer.write(log.SerializeToString())
    return path


def read_warmup_requests(path):
    """Reads a warmup file (or a SavedModel with one) as ``PredictionLog`` protos."""
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    path = pathlib.Path(path)
    if path.is_dir():
        path = path / WARMUP_FILE
    if not path.is_file():
        raise FileNotFoundError(f"No warmup requests at {path}")
    logs = []
    for record in tf.data.TFRecordDataset(str(path)).as_numpy_iterator():
        log = prediction_log_pb2.PredictionLog()
        log.ParseFromString(record)
        logs.append(log)
    return logs
