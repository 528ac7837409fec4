"""The requests `check_serving` replays under the session loader: the export's own
warmup records, batches of bad sentences on every text signature, and malformed
inputs (wrong rank or shape) that every signature must reject with
InvalidArgument. Each is a dict the replay script reads: a name, a signature, and
its inputs as base64-encoded TensorProtos."""

import base64
import pathlib

_TEXT_INPUT = {"text": "string"}  # a signature that takes text only


def _encode(proto):
    """A TensorProto as the base64 text the replay script reads."""
    return base64.b64encode(proto.SerializeToString()).decode("ascii")


def requests(saved_model_dir, signatures):
    """The warmup records, bad-request batches and malformed inputs, as requests."""
    return (
        _warmup_requests(saved_model_dir)
        + _bad_requests(signatures)
        + _malformed_requests(signatures)
    )


def _warmup_requests(saved_model_dir):
    """The warmup records of ``assets.extra/`` (none when the file is absent)."""
    from keras_selfattn.serving import warmup

    warmup_path = pathlib.Path(saved_model_dir) / warmup.WARMUP_FILE
    if not warmup_path.is_file():
        return []
    requests = []
    for i, log in enumerate(warmup.read_warmup_requests(warmup_path)):
        request = log.predict_log.request
        requests.append(
            {
                "name": f"warmup[{i}]",
                "signature": request.model_spec.signature_name or "serving_default",
                "inputs": {k: _encode(v) for k, v in request.inputs.items()},
            }
        )
    return requests


def _bad_requests(signatures):
    """`warmup.bad_request_batches` on every signature that takes ``text`` only."""
    import tensorflow as tf

    from keras_selfattn.serving import warmup

    requests = []
    for signature, (inputs, _, _) in sorted(signatures.items()):
        if inputs != _TEXT_INPUT:
            continue
        for name, batch in warmup.bad_request_batches().items():
            proto = tf.make_tensor_proto(batch, dtype=tf.string, shape=[len(batch)])
            requests.append(
                {
                    "name": name,
                    "signature": signature,
                    "inputs": {"text": _encode(proto)},
                }
            )
    return requests


def _malformed_requests(signatures):
    """`warmup.malformed_inputs` on every signature: each must be rejected."""
    import tensorflow as tf

    from keras_selfattn.serving import warmup

    requests = []
    for signature, (inputs, _, ranks) in sorted(signatures.items()):
        if not inputs or any(not ranks[k] for k in inputs):
            continue  # an input of unknown rank (or a scalar) declares no rank to break
        try:
            malformed = {
                k: warmup.malformed_inputs(ranks[k], dtype)
                for k, dtype in inputs.items()
            }
        except TypeError:  # a dtype NumPy cannot fill (e.g. bfloat16, resource)
            continue
        for name in next(iter(malformed.values())):
            if not all(name in m for m in malformed.values()):
                continue
            requests.append(
                {
                    "name": name,
                    "signature": signature,
                    "inputs": {
                        k: _encode(
                            tf.make_tensor_proto(m[name], dtype=tf.as_dtype(inputs[k]))
                        )
                        for k, m in malformed.items()
                    },
                    "expect": "InvalidArgumentError",
                }
            )
    return requests


def batch_size(request):
    """The batch size of a request's inputs, or None when they disagree."""
    from tensorflow.core.framework import tensor_pb2

    sizes = set()
    for encoded in request["inputs"].values():
        proto = tensor_pb2.TensorProto()
        proto.ParseFromString(base64.b64decode(encoded))
        if proto.tensor_shape.dim:
            sizes.add(proto.tensor_shape.dim[0].size)
    return sizes.pop() if len(sizes) == 1 else None
