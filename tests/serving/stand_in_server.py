"""A stand-in for ``tensorflow_model_server``, for tests only (not shipped).

No tensorflow_model_server binary installs on these machines, so the clients in
``export/`` are tested against this: it loads the newest version under a model
base path with the session-based loader that TF Serving's C++ server uses
(``tf.compat.v1.saved_model.loader.load`` in a ``tf.compat.v1.Session``) and
answers, on 127.0.0.1,

- TF Serving's REST API over ``http.server``:
  ``POST /v1/models/NAME[/versions/N]:predict``
  (row ``instances`` and columnar ``inputs`` forms, ``signature_name``,
  ``{"b64": ...}`` strings, ``_bytes`` outputs in base64, ``{"error": ...}``
  answers), ``GET /v1/models/NAME[/versions/N]`` (version status) and
  ``GET /v1/models/NAME[/versions/N]/metadata``;
- gRPC ``tensorflow.serving.PredictionService`` (``Predict``, ``GetModelMetadata``)
  with the tensorflow-serving-api stubs.

The JSON rules live in ``json_tensor_codec.py``; the predict rules follow
tensorflow_serving/servables/tensorflow/predict_util.cc (missing signature:
FAILED_PRECONDITION; inputs must match the signature exactly; the response echoes
``model_spec`` with the version).
"""

import concurrent.futures
import http.server
import json
import pathlib
import re
import threading

import grpc
import tensorflow as tf
from tensorflow_serving.apis import (
    get_model_metadata_pb2,
    predict_pb2,
    prediction_service_pb2_grpc,
)

from keras_selfattn.serving.session_replay import run_unchecked
from tests.serving.json_tensor_codec import (
    ServingStatus,
    json_to_predict_request,
    predict_response_to_json,
    tensor_proto,
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
                f"Servable not found for request: Specific({model_spec.name}, "
                f"{model_spec.version.value})",
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
                "input size does not match signature: "
                f"{len(request.inputs)}!={len(signature.inputs)} "
                f"len({{{', '.join(sorted(request.inputs))}}}) != "
                f"len({{{', '.join(sorted(signature.inputs))}}})",
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
                    "Expects arg[0] to be "
                    f"{tf.dtypes.as_dtype(signature.inputs[key].dtype).name} but "
                    f"{tf.dtypes.as_dtype(proto.dtype).name} is provided",
                )
            feed[signature.inputs[key].name] = tf.make_ndarray(proto)
        try:
            # Fed as TF Serving feeds: no shape check (tensorflow/serving#1436).
            values = run_unchecked(
                self._session, {o: signature.outputs[o].name for o in outputs}, feed
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
