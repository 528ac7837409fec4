"""A stand-in for ``tensorflow_model_server``, for tests only (not shipped).

No tensorflow_model_server binary installs on these machines, so the clients in
``export/`` are tested against this: it loads the newest version under a model
base path with the session-based loader that TF Serving's C++ server uses
(``tf.compat.v1.saved_model.loader.load`` in a ``tf.compat.v1.Session``) and
answers, on 127.0.0.1,

- TF Serving's REST API over ``http.server``: ``POST /v1/models/NAME[/versions/N]:predict``
  (row ``instances`` and columnar ``inputs`` forms, ``signature_name``,
  ``{"b64": ...}`` strings, ``_bytes`` outputs in base64, ``{"error": ...}``
  answers), ``GET /v1/models/NAME[/versions/N]`` (version status) and
  ``GET /v1/models/NAME[/versions/N]/metadata``;
- gRPC ``tensorflow.serving.PredictionService`` (``Predict``, ``GetModelMetadata``)
  with the tensorflow-serving-api stubs.

The JSON rules follow tensorflow_serving/util/json_tensor.cc (e.g. an empty
``instances`` list is an error, an empty columnar list is an empty batch; with
several outputs a row is an object, with one a plain value), the predict rules
follow tensorflow_serving/servables/tensorflow/predict_util.cc (missing
signature: FAILED_PRECONDITION; inputs must match the signature exactly; the
response echoes ``model_spec`` with the version), and tensors are written as
TF Serving writes them (``AsProtoField``: ``string_val`` / ``float_val``, not
``tensor_content``).
"""

import base64
import concurrent.futures
import http.server
import json
import math
import pathlib
import re
import threading

import grpc
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

_PREDICT_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?:predict$")
_MODEL_PATH = re.compile(r"^/v1/models/([^/:]+)(?:/versions/(\d+))?(/metadata)?$")
_HTTP_STATUS = {
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.INTERNAL: 500,
}
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
    """numpy array -> TensorProto the way TF Serving writes outputs (repeated value fields)."""
    array = np.asarray(array)
    proto = tensor_pb2.TensorProto(
        dtype=dtype,
        tensor_shape=tensor_shape_pb2.TensorShapeProto(
            dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=s) for s in array.shape]
        ),
    )
    getattr(proto, _VALUE_FIELDS[dtype]).extend(array.reshape(-1).tolist())
    return proto


# ---------------------------------------------------------------- JSON <-> tensors (json_tensor.cc)


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
        f"JSON Value: {json.dumps(value)} is not of expected type: {tf.dtypes.as_dtype(dtype).name}",
    )


def _json_to_tensor(value, dtype):
    """A JSON value (scalar or nested lists) -> TensorProto of ``dtype``, dense shape checked."""
    shape = _json_shape(value)
    flat = []

    def fill(item, level):
        if not isinstance(item, list):
            if level != len(shape):
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"JSON Value: {json.dumps(item)} found at incorrect level: {level + 1}",
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
                "instances is a plain list, but expecting list of objects as multiple input tensors "
                "required as per tensorinfo_map",
            )
        columns = {name: [] for name in inputs}
        for index, item in enumerate(instances):
            if as_objects:
                if (
                    not isinstance(item, dict)
                    or _is_b64(item)
                    or set(item) != set(inputs)
                ):
                    raise ServingStatus(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"Failed to process element: {index} of 'instances' list. "
                        f"keys must be equal to: {','.join(sorted(inputs))}",
                    )
                for name in inputs:
                    columns[name].append(item[name])
            else:
                if isinstance(item, dict) and not _is_b64(item):
                    raise ServingStatus(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        f"Expecting value/list but got object at item {index} of input list",
                    )
                columns[next(iter(inputs))].append(item)
        for name, column in columns.items():
            if len({json.dumps(_json_shape(v)) for v in column}) > 1:
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Expecting tensors of one shape for {name}",
                )
            request.inputs[name].CopyFrom(_json_to_tensor(column, inputs[name]))
        return request, "row"
    if "inputs" in body:
        value = body["inputs"]
        if not isinstance(value, dict) or _is_b64(value):
            if len(inputs) > 1:
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    "inputs is a plain value/list, but expecting an object as multiple input tensors "
                    "required as per tensorinfo_map",
                )
            value = {next(iter(inputs)): value}
        for name, dtype in inputs.items():
            if name not in value:
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Missing named input: {name} in 'inputs' object.",
                )
            request.inputs[name].CopyFrom(_json_to_tensor(value[name], dtype))
        return request, "columnar"
    raise ServingStatus(
        grpc.StatusCode.INVALID_ARGUMENT, "Missing 'inputs' or 'instances' key"
    )


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


# ---------------------------------------------------------------- the model server


class StandInModelServer:
    """Serves the newest version under ``model_base`` as ``model_name`` (REST + gRPC).

    Args:
        model_base: the folder holding numbered version folders.
        model_name: the served name.

    Use as a context manager, or call `start` / `stop`. ``rest_port`` and
    ``grpc_port`` are chosen by the OS on 127.0.0.1.
    """

    def __init__(self, model_base, model_name="translator"):
        self.model_name = model_name
        versions = sorted(
            int(p.name) for p in pathlib.Path(model_base).iterdir() if p.name.isdigit()
        )
        if not versions:
            raise FileNotFoundError(f"no version folder in {model_base}")
        self.version = versions[
            -1
        ]  # model_version_policy { latest { num_versions: 1 } }
        self._graph = tf.Graph()
        self._session = tf.compat.v1.Session(graph=self._graph)
        meta_graph = tf.compat.v1.saved_model.loader.load(
            self._session, ["serve"], str(pathlib.Path(model_base) / str(self.version))
        )
        self.signature_defs = {
            k: v for k, v in meta_graph.signature_def.items() if not k.startswith("__")
        }
        self._http = None
        self._grpc = None
        self.rest_port = self.grpc_port = None

    # -- the predict core, shared by REST and gRPC (predict_util.cc)

    def _check_spec(self, model_spec):
        if model_spec.name != self.model_name:
            raise ServingStatus(
                grpc.StatusCode.NOT_FOUND,
                f"Servable not found for request: Latest({model_spec.name})",
            )
        if model_spec.HasField("version") and model_spec.version.value != self.version:
            raise ServingStatus(
                grpc.StatusCode.NOT_FOUND,
                f"Servable not found for request: Specific({model_spec.name}, {model_spec.version.value})",
            )

    def _signature(self, name):
        name = name or "serving_default"
        if name not in self.signature_defs:
            raise ServingStatus(
                grpc.StatusCode.FAILED_PRECONDITION,
                f'Serving signature key "{name}" not found.',
            )
        return name, self.signature_defs[name]

    def input_dtypes(self, signature_name):
        _, signature = self._signature(signature_name)
        return {name: info.dtype for name, info in signature.inputs.items()}

    def predict(self, request):
        """PredictRequest -> PredictResponse, or raises `ServingStatus`."""
        self._check_spec(request.model_spec)
        name, signature = self._signature(request.model_spec.signature_name)
        if set(request.inputs) != set(signature.inputs):
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"input size does not match signature: {len(request.inputs)}!={len(signature.inputs)} "
                f"len({{{', '.join(sorted(request.inputs))}}}) != len({{{', '.join(sorted(signature.inputs))}}})",
            )
        outputs = list(request.output_filter) or sorted(signature.outputs)
        unknown = [o for o in outputs if o not in signature.outputs]
        if unknown:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"output tensor alias not found in signature: {unknown[0]}",
            )
        feed = {}
        for key, proto in request.inputs.items():
            if proto.dtype != signature.inputs[key].dtype:
                raise ServingStatus(
                    grpc.StatusCode.INVALID_ARGUMENT,
                    f"Expects arg[0] to be {tf.dtypes.as_dtype(signature.inputs[key].dtype).name} but "
                    f"{tf.dtypes.as_dtype(proto.dtype).name} is provided",
                )
            feed[signature.inputs[key].name] = tf.make_ndarray(proto)
        try:
            values = self._session.run(
                {o: signature.outputs[o].name for o in outputs}, feed
            )
        except tf.errors.OpError as error:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT, error.message
            ) from None
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.model_name
        response.model_spec.version.value = self.version
        response.model_spec.signature_name = name
        for output in outputs:
            response.outputs[output].CopyFrom(
                tensor_proto(values[output], signature.outputs[output].dtype)
            )
        return response

    def metadata(self, model_spec):
        self._check_spec(model_spec)
        signature_map = get_model_metadata_pb2.SignatureDefMap()
        for name, signature in self.signature_defs.items():
            signature_map.signature_def[name].CopyFrom(signature)
        response = get_model_metadata_pb2.GetModelMetadataResponse()
        response.model_spec.name = self.model_name
        response.model_spec.version.value = self.version
        response.metadata["signature_def"].Pack(signature_map)
        return response

    # -- REST

    def _rest_get(self, path):
        match = _MODEL_PATH.match(path)
        if not match:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT, f"Malformed request: GET {path}"
            )
        name, version, metadata = match.groups()
        spec = predict_pb2.PredictRequest().model_spec
        spec.name = name
        if version is not None:
            spec.version.value = int(version)
        self._check_spec(spec)
        if metadata:
            from google.protobuf import json_format

            answer = json_format.MessageToDict(
                self.metadata(spec), preserving_proto_field_name=True
            )
            return answer
        return {
            "model_version_status": [
                {
                    "version": str(self.version),
                    "state": "AVAILABLE",
                    "status": {"error_code": "OK", "error_message": ""},
                }
            ]
        }

    def _rest_predict(self, path, raw_body):
        match = _PREDICT_PATH.match(path)
        if not match:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT, f"Malformed request: POST {path}"
            )
        name, version = match.groups()
        try:
            body = json.loads(raw_body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ServingStatus(
                grpc.StatusCode.INVALID_ARGUMENT, f"JSON Parse error: {error}"
            ) from None
        request, request_format = json_to_predict_request(
            body, self.input_dtypes, name, None if version is None else int(version)
        )
        return predict_response_to_json(self.predict(request), request_format)

    def _handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, call):
                try:
                    status, body = 200, call()
                except ServingStatus as error:
                    status, body = (
                        _HTTP_STATUS.get(error.code, 500),
                        {"error": error.message},
                    )
                data = json.dumps(body, ensure_ascii=False, indent=4).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._answer(lambda: server._rest_get(self.path))

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._answer(lambda: server._rest_predict(self.path, raw))

            def log_message(self, *args):
                pass

        return Handler

    # -- gRPC

    def _servicer(self):
        server = self

        class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
            def Predict(self, request, context):
                try:
                    return server.predict(request)
                except ServingStatus as error:
                    context.abort(error.code, error.message)

            def GetModelMetadata(self, request, context):
                if list(request.metadata_field) != ["signature_def"]:
                    context.abort(
                        grpc.StatusCode.INVALID_ARGUMENT,
                        "Metadata field signature_def only",
                    )
                try:
                    return server.metadata(request.model_spec)
                except ServingStatus as error:
                    context.abort(error.code, error.message)

        return PredictionService()

    def start(self):
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.rest_port = self._http.server_address[1]
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self._grpc = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            self._servicer(), self._grpc
        )
        self.grpc_port = self._grpc.add_insecure_port("127.0.0.1:0")
        self._grpc.start()
        return self

    def stop(self):
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._grpc is not None:
            self._grpc.stop(grace=None)
        self._session.close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
