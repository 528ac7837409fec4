"""TF Serving's JSON <-> TensorProto rules, for the stand-in server (tests only).

The JSON rules follow tensorflow_serving/util/json_tensor.cc (e.g. an empty
``instances`` list is an error, an empty columnar list is an empty batch; with
several outputs a row is an object, with one a plain value), and tensors are
written as TF Serving writes them (``AsProtoField``: ``string_val`` /
``float_val``, not ``tensor_content``). A failed conversion raises
`ServingStatus` with the gRPC code and message TF Serving gives.
"""

import base64
import json
import math

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import predict_pb2

_VALUE_FIELDS = {
    types_pb2.DT_STRING: "string_val",
    types_pb2.DT_FLOAT: "float_val",
    types_pb2.DT_DOUBLE: "double_val",
    types_pb2.DT_INT32: "int_val",
    types_pb2.DT_INT64: "int64_val",
    types_pb2.DT_BOOL: "bool_val",
}


class ServingStatus(Exception):
    """A failed call: a gRPC status code and TF Serving's message."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code
        self.message = message


def tensor_proto(array, dtype):
    """numpy array -> TensorProto the way TF Serving writes outputs (repeated value
    fields)."""
    array = np.asarray(array)
    proto = tensor_pb2.TensorProto(
        dtype=dtype,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in array.shape]
        ),
    )
    getattr(proto, _VALUE_FIELDS[dtype]).extend(array.reshape(-1).tolist())
    return proto


def _json_shape(value):
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        if not value:
            break
        value = value[0]
    return shape


def _is_b64(value):
    return (
        isinstance(value, dict)
        and len(value) == 1
        and isinstance(value.get("b64"), str)
    )


def _json_leaf(value, dtype):
    if dtype == types_pb2.DT_STRING:
        if _is_b64(value):
            try:
                return base64.b64decode(value["b64"], validate=True)
            except ValueError:
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT, "Unable to base64 decode"
                ) from None
        if isinstance(value, str):
            return value.encode("utf-8")
    elif dtype in (types_pb2.DT_FLOAT, types_pb2.DT_DOUBLE):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    elif dtype in (types_pb2.DT_INT32, types_pb2.DT_INT64):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif dtype == types_pb2.DT_BOOL and isinstance(value, bool):
        return value
    raise ServingStatus(
        grpc.StatusCode.INVALID_ARGUMENT,
        f"JSON Value: {json.dumps(value)} is not of expected type: "
        f"{tf.dtypes.as_dtype(dtype).name}",
    )


def _json_to_tensor(value, dtype):
    """A JSON value (scalar or nested lists) -> TensorProto of ``dtype``, dense shape
    checked."""
    shape = _json_shape(value)
    flat = []

    def fill(item, level):
        if not isinstance(item, list):
            if level != len(shape):
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"JSON Value: {json.dumps(item)} found at incorrect level: "
                    f"{level + 1}",
                )
            flat.append(_json_leaf(item, dtype))
            return
        if level >= len(shape) or len(item) != shape[level]:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Encountered list at unexpected size: {len(item)} at level: {level}",
            )
        for element in item:
            fill(element, level + 1)

    fill(value, 0)
    proto = tensor_pb2.TensorProto(
        dtype=dtype,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in shape]
        ),
    )
    getattr(proto, _VALUE_FIELDS[dtype]).extend(flat)
    return proto


def json_to_predict_request(body, input_dtypes, model_name, version):
    """A REST predict body -> (PredictRequest, "row" | "columnar")."""
    if not isinstance(body, dict):
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT, "JSON Value: Is not object"
        )
    request = predict_pb2.PredictRequest()
    request.model_spec.name = model_name
    if version is not None:
        request.model_spec.version.value = version
    signature = body.get("signature_name", "")
    if not isinstance(signature, str):
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            "'signature_name' key must be a string value.",
        )
    request.model_spec.signature_name = signature
    inputs = input_dtypes(signature or "serving_default")
    if "instances" in body and "inputs" in body:
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            "expecting only one of 'inputs' or 'instances' keys to exist",
        )
    if "instances" in body:
        for name, column in _instance_columns(body, inputs).items():
            _check_one_shape(name, column)
            request.inputs[name].CopyFrom(_json_to_tensor(column, inputs[name]))
        return request, "row"
    if "inputs" in body:
        value = _named_inputs(body["inputs"], inputs)
        for name, dtype in inputs.items():
            request.inputs[name].CopyFrom(
                _json_to_tensor(_named_input(value, name), dtype)
            )
        return request, "columnar"
    raise ServingStatus(
        grpc.StatusCode.INVALID_ARGUMENT, "Missing 'inputs' or 'instances' key"
    )


def _instance_columns(body, inputs):
    """The row form's ``instances`` -> {input name: list of values}, checked."""
    instances = body["instances"]
    if not isinstance(instances, list):
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            "Excepting 'instances' to be an list/array",
        )
    if not instances:
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"JSON Value: {json.dumps(body, indent=4)} No values in 'instances' array",
        )
    as_objects = isinstance(instances[0], dict) and not _is_b64(instances[0])
    if not as_objects and len(inputs) > 1:
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            "instances is a plain list, but expecting list of objects as multiple "
            "input tensors required as per tensorinfo_map",
        )
    columns = {name: [] for name in inputs}
    for index, item in enumerate(instances):
        if as_objects:
            _check_instance_object(item, index, inputs)
            for name in inputs:
                columns[name].append(item[name])
        elif isinstance(item, dict) and not _is_b64(item):
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"Expecting value/list but got object at item {index} of input list",
            )
        else:
            columns[next(iter(inputs))].append(item)
    return columns


def _check_one_shape(name, column):
    if len({json.dumps(_json_shape(v)) for v in column}) > 1:
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Expecting tensors of one shape for {name}",
        )


def _check_instance_object(item, index, inputs):
    if not isinstance(item, dict) or _is_b64(item) or set(item) != set(inputs):
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Failed to process element: {index} of 'instances' list. "
            f"keys must be equal to: {','.join(sorted(inputs))}",
        )


def _named_inputs(value, inputs):
    """The columnar form's ``inputs`` as an object (a plain value names the input)."""
    if isinstance(value, dict) and not _is_b64(value):
        return value
    if len(inputs) > 1:
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            "inputs is a plain value/list, but expecting an object as multiple "
            "input tensors required as per tensorinfo_map",
        )
    return {next(iter(inputs)): value}


def _named_input(value, name):
    if name not in value:
        raise ServingStatus(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"Missing named input: {name} in 'inputs' object.",
        )
    return value[name]


def _json_values(array, as_bytes):
    if isinstance(array, np.ndarray) and array.ndim:
        return [_json_values(item, as_bytes) for item in array]
    value = array.item() if isinstance(array, (np.generic, np.ndarray)) else array
    if isinstance(value, bytes):
        if as_bytes:
            return {"b64": base64.b64encode(value).decode("ascii")}
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise ServingStatus(
                grpc.StatusCode.INTERNAL,
                "an output string is not valid UTF-8 (JSON cannot hold it)",
            ) from None
    if isinstance(value, float) and not math.isfinite(value):
        return (
            "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        )
    return value


def predict_response_to_json(response, request_format):
    """A PredictResponse -> TF Serving's REST answer body (row or columnar)."""
    arrays = {
        name: tf.make_ndarray(proto) for name, proto in sorted(response.outputs.items())
    }
    as_bytes = {
        name: proto.dtype == types_pb2.DT_STRING and name.endswith("_bytes")
        for name, proto in response.outputs.items()
    }
    if request_format == "row":
        sizes = {a.shape[0] if a.ndim else None for a in arrays.values()}
        if None in sizes or len(sizes) != 1:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT,
                "outputs have inconsistent batch sizes",
            )
        rows = []
        for i in range(sizes.pop()):
            if len(arrays) > 1:
                rows.append(
                    {
                        name: _json_values(a[i], as_bytes[name])
                        for name, a in arrays.items()
                    }
                )
            else:
                name, a = next(iter(arrays.items()))
                rows.append(_json_values(a[i], as_bytes[name]))
        return {"predictions": rows}
    if len(arrays) > 1:
        return {
            "outputs": {
                name: _json_values(a, as_bytes[name]) for name, a in arrays.items()
            }
        }
    name, a = next(iter(arrays.items()))
    return {"outputs": _json_values(a, as_bytes[name])}
