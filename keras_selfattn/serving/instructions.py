"""What to run after an export: a ``docker run`` line and ``curl`` requests."""

import json
import pathlib
import shlex

from keras_selfattn.serving.audit import XLA_SERVER_FLAG
from keras_selfattn.serving.export import DEFAULT_MODEL_NAME
from keras_selfattn.serving.signatures import NBEST_SIGNATURE

__all__ = ["serving_instructions"]


# Long: half of it is the docstring and its doctest of the printed commands.
def serving_instructions(
    export_base,
    model_name=DEFAULT_MODEL_NAME,
    *,
    sample_text,
    rest_port=8501,
    grpc_port=8500,
    xla=False,
):
    """The ``docker run`` line serving ``export_base`` and ``curl`` lines querying it.

    Args:
        export_base: the model's base folder (holding the version folders).
        model_name: the served name (``MODEL_NAME``; the REST path).
        sample_text: the sentence in the example requests: a source the model
            knows, e.g. ``sample_sources(run_dir, 1)[0]``.
        rest_port: the host port of the REST API.
        grpc_port: the host port of the gRPC API.
        xla: the export was written with ``xla=True``: the server gets
            ``--xla_cpu_compilation_enabled=true`` (after the image name, as the
            tensorflow/serving image passes its arguments to the model server).

    Returns:
        A multi-line string of shell commands.

    Example:

    >>> print(serving_instructions("/srv/models/translator", sample_text="Va !"))
    ... # doctest: +NORMALIZE_WHITESPACE
    # serve (REST on port 8501, gRPC on port 8500):
    docker run -p 8500:8500 -p 8501:8501
      --mount type=bind,source=/srv/models/translator,target=/models/translator
      -e MODEL_NAME=translator -t tensorflow/serving
    # query:
    curl -s http://localhost:8501/v1/models/translator
    curl -s -X POST http://localhost:8501/v1/models/translator:predict
      -H 'Content-Type: application/json' -d '{"instances": ["Va !"]}'
    curl -s -X POST http://localhost:8501/v1/models/translator:predict
      -H 'Content-Type: application/json'
      -d '{"signature_name": "translate_nbest", "inputs": {"text": ["Va !"]}}'
    """
    source = pathlib.Path(export_base).resolve()
    mount = f"type=bind,source={source},target=/models/{model_name}"
    body = json.dumps({"instances": [sample_text]}, ensure_ascii=False)
    nbest = json.dumps(
        {"signature_name": NBEST_SIGNATURE, "inputs": {"text": [sample_text]}},
        ensure_ascii=False,
    )
    url = f"http://localhost:{rest_port}/v1/models/{model_name}"
    predict = f"curl -s -X POST {url}:predict -H 'Content-Type: application/json' -d"
    return "\n".join(
        [
            f"# serve (REST on port {rest_port}, gRPC on port {grpc_port}):",
            (
                f"docker run -p {grpc_port}:8500 -p {rest_port}:8501 "
                f"--mount {shlex.quote(mount)} "
                f"-e MODEL_NAME={shlex.quote(model_name)} -t tensorflow/serving"
                + (f" {XLA_SERVER_FLAG}" if xla else "")
            ),
            "# query:",
            f"curl -s {url}",
            f"{predict} {shlex.quote(body)}",
            f"{predict} {shlex.quote(nbest)}",
        ]
    )
