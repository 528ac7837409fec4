"""The files of export/: they parse as the protos TF Serving reads, and the README's
commands and example bodies are right."""

import json
import pathlib
import re
import urllib.error
import urllib.request

import pytest
from google.protobuf import (
    descriptor_pb2,
    descriptor_pool,
    message_factory,
    text_format,
)
from tensorflow_serving.config import model_server_config_pb2

from tests.serving.stand_in_server import StandInModelServer

# One xdist worker runs every serving test, so the session fixtures train once.

EXPORT = pathlib.Path(__file__).resolve().parents[2] / "export"


def test_models_config_parses_as_model_server_config():
    config = text_format.Parse(
        (EXPORT / "models.config").read_text(),
        model_server_config_pb2.ModelServerConfig(),
    )
    (model,) = config.model_config_list.config
    assert model.name == "translator"
    assert model.base_path == "/models/translator"
    assert model.model_platform == "tensorflow"
    assert model.model_version_policy.WhichOneof("policy_choice") == "latest"
    assert model.model_version_policy.latest.num_versions == 1


def batching_parameters_class():
    """tensorflow.serving.BatchingParameters, built from session_bundle_config.proto's
    field list (tensorflow-serving-api does not ship that proto)."""
    pool = descriptor_pool.DescriptorPool()
    from google.protobuf import wrappers_pb2

    wrappers = descriptor_pb2.FileDescriptorProto()
    wrappers_pb2.DESCRIPTOR.CopyToProto(wrappers)
    pool.Add(wrappers)
    file = descriptor_pb2.FileDescriptorProto(
        name="session_bundle_config_excerpt.proto",
        package="tensorflow.serving",
        syntax="proto3",
        dependency=["google/protobuf/wrappers.proto"],
    )
    message = file.message_type.add(name="BatchingParameters")
    field = descriptor_pb2.FieldDescriptorProto
    for number, name, type_name in [
        (1, "max_batch_size", ".google.protobuf.Int64Value"),
        (2, "batch_timeout_micros", ".google.protobuf.Int64Value"),
        (3, "max_enqueued_batches", ".google.protobuf.Int64Value"),
        (4, "num_batch_threads", ".google.protobuf.Int64Value"),
        (5, "thread_pool_name", ".google.protobuf.StringValue"),
    ]:
        message.field.add(
            name=name,
            number=number,
            type=field.TYPE_MESSAGE,
            type_name=type_name,
            label=field.LABEL_OPTIONAL,
        )
    message.field.add(
        name="allowed_batch_sizes",
        number=6,
        type=field.TYPE_INT64,
        label=field.LABEL_REPEATED,
    )
    message.field.add(
        name="pad_variable_length_inputs",
        number=7,
        type=field.TYPE_BOOL,
        label=field.LABEL_OPTIONAL,
    )
    pool.Add(file)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("tensorflow.serving.BatchingParameters")
    )


def test_batching_parameters_parse_and_are_consistent():
    params = text_format.Parse(
        (EXPORT / "batching_parameters.txt").read_text(), batching_parameters_class()()
    )
    sizes = list(params.allowed_batch_sizes)
    assert sizes == sorted(sizes), "allowed_batch_sizes must increase"
    assert sizes[-1] == params.max_batch_size.value, (
        "the last allowed size must equal max_batch_size"
    )
    assert params.num_batch_threads.value >= 1 and params.batch_timeout_micros.value > 0


def test_readme_has_the_docker_line_and_says_what_is_not_tested():
    readme = (EXPORT / "README.md").read_text()
    assert (
        "docker run -p 8500:8500 -p 8501:8501 --mount "
        "type=bind,source=$(pwd)/exports/translator,"
        "target=/models/translator -e MODEL_NAME=translator -t tensorflow/serving"
    ) in readme
    assert "The `tensorflow_model_server` binary itself is not run in CI" in readme
    for name in (
        "models.config",
        "batching_parameters.txt",
        "rest_client.py",
        "grpc_client.py",
    ):
        assert (EXPORT / name).is_file() and name in readme


def shape_of(value):
    """The structure of a JSON value: keys, list lengths and leaf types (not the
    values)."""
    if isinstance(value, dict):
        return {k: shape_of(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape_of(v) for v in value]
    return "number" if isinstance(value, (int, float)) else type(value).__name__


@pytest.mark.slow
def test_readme_example_bodies_match_the_server(text_export):
    readme = (EXPORT / "README.md").read_text()
    blocks = re.findall(r"```json (request|response)\n(.*?)```", readme, re.DOTALL)
    pairs = list(zip(blocks[::2], blocks[1::2]))
    assert len(pairs) >= 4 and all(
        a[0] == "request" and b[0] == "response" for a, b in pairs
    )
    with StandInModelServer(text_export.parent, "translator") as server:
        url = f"http://127.0.0.1:{server.rest_port}/v1/models/translator:predict"
        for (_, request_text), (_, response_text) in pairs:
            request = urllib.request.Request(
                url, request_text.encode(), {"Content-Type": "application/json"}
            )
            try:
                with urllib.request.urlopen(request, timeout=30) as answer:
                    body = json.loads(answer.read())
            except urllib.error.HTTPError as error:
                body = json.loads(error.read())
            documented = json.loads(response_text)
            if "error" in documented:
                assert set(body) == {"error"} and body["error"] == documented["error"]
            else:
                assert shape_of(body) == shape_of(documented), request_text
        # A list of lists for text [B]: TF Serving passes the shape to the graph,
        # whose in-graph check answers InvalidArgument (HTTP 400), not a crash.
        nested = json.dumps({"instances": [["14 juillet 1989", "3 mars 2001"]]})
        request = urllib.request.Request(
            url, nested.encode(), {"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as error_info:
            urllib.request.urlopen(request, timeout=30)
        assert error_info.value.code == 400
        error = json.loads(error_info.value.read())["error"]
        assert "[1,2] is not compatible with expected shape [?]" in error
        with urllib.request.urlopen(
            f"http://127.0.0.1:{server.rest_port}/v1/models/translator", timeout=30
        ) as answer:
            status = json.loads(answer.read())
    documented_status = json.loads(
        re.search(
            r"`GET /v1/models/translator`:\n\n```json\n(.*?)```", readme, re.DOTALL
        ).group(1)
    )
    assert status == documented_status
