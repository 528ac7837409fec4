"""export/rest_client.py and export/grpc_client.py over real HTTP and gRPC on 127.0.0.1,
against the stand-in server (session-based loader, TF Serving's REST and
PredictionService formats)."""

import base64
import importlib.util
import json
import pathlib
import urllib.request

import grpc
import numpy as np
import pytest

from keras_selfattn.inference import load_translator
from tests.serving.stand_in_server import StandInModelServer
from tests.serving.tiny_runs import BEAM_SIZE

ROOT = pathlib.Path(__file__).resolve().parents[2]
# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = pytest.mark.slow


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "export" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rest_client = load_script("rest_client")
grpc_client = load_script("grpc_client")


@pytest.fixture(scope="module")
def server(text_export):
    with StandInModelServer(text_export.parent, "translator") as running:
        yield running


@pytest.fixture(scope="module")
def expected(text_run_dir, sample_texts):
    translator = load_translator(text_run_dir)
    return translator.translate(sample_texts), translator.translate(
        sample_texts, beam_size=BEAM_SIZE
    )


def assert_translations(rows, expected_translations):
    assert [row["translation"] for row in rows] == [
        t.text for t in expected_translations
    ]
    np.testing.assert_allclose(
        [row["score"] for row in rows],
        [t.score for t in expected_translations],
        atol=1e-4,
    )


@pytest.mark.parametrize("request_format", ["instances", "inputs"])
def test_rest_predict_equals_translate(server, sample_texts, expected, request_format):
    rows = rest_client.predict(
        sample_texts, port=server.rest_port, request_format=request_format
    )
    assert_translations(rows, expected[0])


def test_rest_nbest(server, sample_texts, expected):
    rows = rest_client.predict(
        sample_texts,
        port=server.rest_port,
        signature="translate_nbest",
        request_format="inputs",
    )
    assert [len(row["translations"]) for row in rows] == [BEAM_SIZE] * len(sample_texts)
    assert [row["translations"][0] for row in rows] == [t.text for t in expected[1]]


def test_rest_raw_bodies_match_tf_serving(server, sample_texts):
    """The documented wire format, without the client: row and columnar answers."""
    url = f"http://127.0.0.1:{server.rest_port}/v1/models/translator:predict"

    def post(body):
        request = urllib.request.Request(
            url, json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    row = post({"instances": sample_texts[:2]})
    assert list(row) == ["predictions"] and len(row["predictions"]) == 2
    assert set(row["predictions"][0]) == {"translation", "score"}
    assert isinstance(row["predictions"][0]["translation"], str) and isinstance(
        row["predictions"][0]["score"], float
    )
    columnar = post({"inputs": {"text": sample_texts[:2]}})
    assert list(columnar) == ["outputs"] and set(columnar["outputs"]) == {
        "translation",
        "score",
    }
    assert [p["translation"] for p in row["predictions"]] == columnar["outputs"][
        "translation"
    ]
    named = post(
        {
            "signature_name": "serving_default",
            "instances": [{"text": t} for t in sample_texts[:2]],
        }
    )
    assert named == row
    # The token-id endpoint: one output, so rows are plain values.
    ids = post(
        {
            "signature_name": "serve",
            "instances": [{"source": [4, 5, 0], "target_in": [2]}],
        }
    )
    logits = np.array(ids["predictions"])
    assert logits.ndim == 3 and logits.shape[:2] == (1, 1)


def test_rest_bad_requests(server):
    port = server.rest_port
    # Invalid UTF-8 travels base64-encoded and still gets a (valid UTF-8) answer.
    rows = rest_client.predict([b"\xff\xfe 12 mars", "", "x" * 10_000], port=port)
    assert len(rows) == 3 and rows[1] == {"translation": "", "score": 0.0}
    assert rest_client.build_request([b"\xff"])["instances"] == [
        {"b64": base64.b64encode(b"\xff").decode()}
    ]
    # An empty batch: TF Serving refuses an empty instances list, accepts an empty
    # columnar one.
    with pytest.raises(rest_client.ServingError) as error:
        rest_client.predict([], port=port)
    assert (
        error.value.status == 400
        and "No values in 'instances' array" in error.value.message
    )
    assert rest_client.predict([], port=port, request_format="inputs") == []
    with pytest.raises(rest_client.ServingError) as error:
        rest_client.predict(["a"], port=port, signature="nope")
    assert (
        error.value.status == 400
        and 'Serving signature key "nope" not found' in error.value.message
    )
    with pytest.raises(rest_client.ServingError) as error:
        rest_client.predict(["a"], port=port, model="other")
    assert error.value.status == 404


def test_rest_status_and_metadata(server):
    status = rest_client.model_status(port=server.rest_port)
    assert status == {
        "model_version_status": [
            {
                "version": "1",
                "state": "AVAILABLE",
                "status": {"error_code": "OK", "error_message": ""},
            }
        ]
    }
    metadata = rest_client.model_metadata(port=server.rest_port)
    signatures = metadata["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "translate_nbest", "serve"} <= set(signatures)
    assert metadata["model_spec"]["name"] == "translator"


def test_rest_client_command_line(server, sample_texts, expected, capsys):
    assert (
        rest_client.main(
            ["--host", "127.0.0.1", "--port", str(server.rest_port), sample_texts[0]]
        )
        == 0
    )
    translation, score = capsys.readouterr().out.rstrip("\n").split("\t")
    assert translation == expected[0][0].text and float(score) == pytest.approx(
        expected[0][0].score, abs=1e-3
    )
    assert (
        rest_client.main(["--port", str(server.rest_port), "--model", "missing", "a"])
        == 1
    )
    assert "HTTP 404" in capsys.readouterr().err


def test_grpc_predict_equals_translate(server, sample_texts, expected):
    rows = grpc_client.predict(sample_texts, host="127.0.0.1", port=server.grpc_port)
    assert_translations(rows, expected[0])
    nbest = grpc_client.predict(
        sample_texts,
        host="127.0.0.1",
        port=server.grpc_port,
        signature="translate_nbest",
    )
    assert [row["translations"][0] for row in nbest] == [t.text for t in expected[1]]
    assert all(len(row["scores"]) == BEAM_SIZE for row in nbest)


def test_grpc_bad_requests_and_metadata(server):
    port = server.grpc_port
    assert grpc_client.predict([], host="127.0.0.1", port=port) == []
    rows = grpc_client.predict(
        [b"\xc3\x28", "   ", "qwxz vbnmk"], host="127.0.0.1", port=port
    )
    assert len(rows) == 3 and rows[1] == {"translation": "", "score": 0.0}
    with pytest.raises(grpc.RpcError) as error:
        grpc_client.predict(["a"], host="127.0.0.1", port=port, version=99)
    assert error.value.code() == grpc.StatusCode.NOT_FOUND
    metadata = grpc_client.model_metadata(host="127.0.0.1", port=port)
    assert metadata["serving_default"] == {
        "inputs": {"text": "DT_STRING"},
        "outputs": {"translation": "DT_STRING", "score": "DT_FLOAT"},
    }
    request = grpc_client.make_request(["a", "b"], version=1)
    assert request.model_spec.version.value == 1 and list(
        request.inputs["text"].string_val
    ) == [b"a", b"b"]


def test_grpc_client_command_line(server, capsys):
    assert (
        grpc_client.main(
            ["--host", "127.0.0.1", "--port", str(server.grpc_port), "--metadata"]
        )
        == 0
    )
    assert "translate_nbest" in capsys.readouterr().out
    assert (
        grpc_client.main(
            [
                "--host",
                "127.0.0.1",
                "--port",
                str(server.grpc_port),
                "--signature",
                "nope",
                "a",
            ]
        )
        == 1
    )
    assert "FAILED_PRECONDITION" in capsys.readouterr().err
