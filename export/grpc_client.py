#!/usr/bin/env python3
r"""Query a TensorFlow Serving translator over gRPC (tensorflow-serving-api).

    pip install tensorflow-serving-api     # brings grpcio and the protos
    python export/grpc_client.py --host localhost --port 8500 \
        "14 juillet 1989" "3 mars 2001"
    python export/grpc_client.py --signature translate_nbest "14 juillet 1989"
    python export/grpc_client.py --metadata

Calls ``tensorflow.serving.PredictionService/Predict`` with a ``PredictRequest``:
``model_spec {name: "translator", signature_name: "serving_default"}`` and input
``text``, a ``DT_STRING`` tensor of shape [B] (raw bytes: no UTF-8 requirement,
no base64). The ``PredictResponse`` holds ``translation`` (``DT_STRING`` [B]) and
``score`` (``DT_FLOAT`` [B]); ``translate_nbest`` gives ``translations`` and
``scores`` of shape [B, K]. An empty batch (B = 0) is valid.

Importable: `make_request`, `predict`, `parse_response`, `model_metadata`.
"""

import argparse
import sys

__all__ = ["make_request", "model_metadata", "parse_response", "predict"]

_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


def make_request(
    texts,
    model="translator",
    signature="serving_default",
    version=None,
    input_name="text",
):
    """A ``PredictRequest`` for a batch of sentences (str or bytes)."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    request.model_spec.name = model
    request.model_spec.signature_name = signature or "serving_default"
    if version is not None:
        request.model_spec.version.value = version
    values = [t.encode("utf-8") if isinstance(t, str) else bytes(t) for t in texts]
    tensor = tensor_pb2.TensorProto(
        dtype=types_pb2.DT_STRING,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=len(values))]
        ),
        string_val=values,
    )
    request.inputs[input_name].CopyFrom(tensor)
    return request


def _to_list(tensor):
    """A TensorProto -> nested Python lists (strings decoded as UTF-8 where valid)."""
    import numpy as np
    from tensorflow.core.framework import types_pb2

    shape = [d.size for d in tensor.tensor_shape.dim]
    if tensor.dtype == types_pb2.DT_STRING:
        flat = [v.decode("utf-8") if _is_utf8(v) else v for v in tensor.string_val]
        array = np.array(flat, dtype=object)
    else:
        numpy_dtype = {
            types_pb2.DT_FLOAT: np.float32,
            types_pb2.DT_DOUBLE: np.float64,
            types_pb2.DT_INT32: np.int32,
            types_pb2.DT_INT64: np.int64,
        }[tensor.dtype]
        if tensor.tensor_content:
            array = np.frombuffer(tensor.tensor_content, dtype=numpy_dtype)
        else:
            field = {
                types_pb2.DT_FLOAT: "float_val",
                types_pb2.DT_DOUBLE: "double_val",
                types_pb2.DT_INT32: "int_val",
                types_pb2.DT_INT64: "int64_val",
            }[tensor.dtype]
            array = np.array(getattr(tensor, field), dtype=numpy_dtype)
    size = int(np.prod(shape)) if shape else 1
    if array.size == 1 and size > 1:  # a proto may hold one value for a filled tensor
        array = np.repeat(array, size)
    return array.reshape(shape).tolist()


def _is_utf8(value):
    try:
        value.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def parse_response(response):
    """A ``PredictResponse`` -> one dict {output name: value} per sentence."""
    columns = {name: _to_list(tensor) for name, tensor in response.outputs.items()}
    count = len(next(iter(columns.values()))) if columns else 0
    return [{name: column[i] for name, column in columns.items()} for i in range(count)]


def _stub(host, port):
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    channel = grpc.insecure_channel(
        f"{host}:{port}",
        options=[
            ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
            ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ],
    )
    return channel, prediction_service_pb2_grpc.PredictionServiceStub(channel)


def predict(
    texts,
    host="localhost",
    port=8500,
    model="translator",
    signature="serving_default",
    version=None,
    timeout=30.0,
):
    """Translates ``texts``: one dict per sentence (e.g. ``{"translation", "score"}``).

    Raises:
        grpc.RpcError: the server answered with an error (``.code()``, ``.details()``).
    """
    channel, stub = _stub(host, port)
    with channel:
        response = stub.Predict(
            make_request(texts, model, signature, version), timeout=timeout
        )
    return parse_response(response)


def model_metadata(
    host="localhost", port=8500, model="translator", version=None, timeout=10.0
):
    """The served signatures: dict name -> {"inputs": {name: dtype}, "outputs":
    {...}}."""
    from tensorflow.core.framework import types_pb2
    from tensorflow_serving.apis import get_model_metadata_pb2

    request = get_model_metadata_pb2.GetModelMetadataRequest(
        metadata_field=["signature_def"]
    )
    request.model_spec.name = model
    if version is not None:
        request.model_spec.version.value = version
    channel, stub = _stub(host, port)
    with channel:
        response = stub.GetModelMetadata(request, timeout=timeout)
    signature_map = get_model_metadata_pb2.SignatureDefMap()
    response.metadata["signature_def"].Unpack(signature_map)
    return {
        name: {
            "inputs": {
                k: types_pb2.DataType.Name(v.dtype) for k, v in sig.inputs.items()
            },
            "outputs": {
                k: types_pb2.DataType.Name(v.dtype) for k, v in sig.outputs.items()
            },
        }
        for name, sig in signature_map.signature_def.items()
    }


def _format_row(row):
    if "translations" in row:
        return " | ".join(
            f"{t}\t{s:.4f}" for t, s in zip(row["translations"], row["scores"])
        )
    if "translation" in row:
        return f"{row['translation']}\t{row['score']:.4f}"
    return repr(row)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Query a TF Serving translator over gRPC."
    )
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=8500)
    parser.add_argument("--model", default="translator", help="served model name")
    parser.add_argument(
        "--version",
        type=int,
        default=None,
        help="a specific version (default: the server's choice)",
    )
    parser.add_argument(
        "--signature", default="serving_default", help="e.g. translate_nbest"
    )
    parser.add_argument(
        "--metadata", action="store_true", help="print the signatures and exit"
    )
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "text", nargs="*", help="sentences (default: one per line on stdin)"
    )
    args = parser.parse_args(argv)

    import grpc

    try:
        if args.metadata:
            for name, io in sorted(
                model_metadata(args.host, args.port, args.model, args.version).items()
            ):
                print(f"{name}: {io['inputs']} -> {io['outputs']}")
            return 0
        texts = args.text or [line.rstrip("\n") for line in sys.stdin]
        rows = predict(
            texts,
            args.host,
            args.port,
            args.model,
            args.signature,
            args.version,
            args.timeout,
        )
    except grpc.RpcError as error:
        print(f"grpc_client: {error.code().name}: {error.details()}", file=sys.stderr)
        return 1
    for row in rows:
        print(_format_row(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
