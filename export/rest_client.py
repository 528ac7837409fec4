#!/usr/bin/env python3
r"""Query a TensorFlow Serving translator over REST (standard library only).

    python export/rest_client.py --host localhost --port 8501 \
        "14 juillet 1989" "3 mars 2001"
    python export/rest_client.py --format inputs --signature translate_nbest \
        "14 juillet 1989"
    python export/rest_client.py --status      # GET /v1/models/translator
    python export/rest_client.py --metadata    # GET /v1/models/translator/metadata

Prints one line per sentence: the translation, a tab, the score (for
``translate_nbest``: every hypothesis, best first, `` | ``-separated).

TF Serving's REST predict API (POST ``/v1/models/NAME[/versions/N]:predict``) takes

- the row form ``{"instances": ["text 1", "text 2"]}`` and answers
  ``{"predictions": [{"translation": "...", "score": -0.1}, ...]}`` (one object per
  sentence; a signature with a single output gives plain values). The instances
  list must not be empty;
- the columnar form ``{"inputs": {"text": ["text 1", "text 2"]}}`` (or
  ``{"inputs": ["text 1", ...]}``) and answers ``{"outputs": {"translation":
  [...], "score": [...]}}``. An empty list is a valid (empty) batch.

Add ``"signature_name": "translate_nbest"`` to call another signature. Text that is
not valid UTF-8 travels as ``{"b64": "<base64>"}``; outputs whose names end in
``_bytes`` come back that way (none of ours do). Errors come back as
``{"error": "..."}`` with an HTTP error status.

Importable: `predict`, `build_request`, `parse_response`, `model_status`,
`model_metadata`.
"""

import argparse
import base64
import json
import sys
import urllib.error
import urllib.request

__all__ = [
    "ServingError",
    "build_request",
    "model_metadata",
    "model_status",
    "parse_response",
    "predict",
]


class ServingError(RuntimeError):
    """An error answer from the server: ``status`` (HTTP code) and ``message``."""

    def __init__(self, status, message):
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _json_text(text):
    """A JSON value for one input string: plain when valid UTF-8, else {"b64": ...}."""
    if isinstance(text, str):
        return text
    try:
        return text.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(text).decode("ascii")}


def build_request(texts, signature=None, request_format="instances", input_name="text"):
    """The JSON body of a predict request.

    Args:
        texts: sentences (str, or bytes that may not be UTF-8).
        signature: signature name (None: ``serving_default``).
        request_format: ``"instances"`` (row) or ``"inputs"`` (columnar).
        input_name: the signature's input (``text``), named in the columnar form.

    Returns:
        A dict, ready for `json.dumps`.
    """
    values = [_json_text(t) for t in texts]
    if request_format == "instances":
        body = {"instances": values}  # plain values: the signature has one input
    elif request_format == "inputs":
        body = {"inputs": {input_name: values}}
    else:
        raise ValueError(
            "request_format must be 'instances' or 'inputs'. Received: "
            f"{request_format!r}"
        )
    if signature:
        body["signature_name"] = signature
    return body


def _decode_value(value):
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_decode_value(v) for v in value]
    return value


def parse_response(body):
    """A predict response (either form) -> one dict {output name: value} per sentence.

    A signature with a single output gives rows of plain values in TF Serving's
    JSON; they are returned as ``{"output": value}`` dicts here, with the name unknown.
    """
    if "predictions" in body:
        return [
            {k: _decode_value(v) for k, v in row.items()}
            if isinstance(row, dict)
            else {"output": _decode_value(row)}
            for row in body["predictions"]
        ]
    if "outputs" in body:
        outputs = body["outputs"]
        if not isinstance(outputs, dict):
            return [{"output": _decode_value(v)} for v in outputs]
        columns = {k: _decode_value(v) for k, v in outputs.items()}
        count = len(next(iter(columns.values()))) if columns else 0
        return [{k: v[i] for k, v in columns.items()} for i in range(count)]
    raise ValueError(f"Not a predict response: {sorted(body)}")


def _call(url, body=None, timeout=30.0):
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(
        url, data=data, method="GET" if body is None else "POST"
    )
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        text = error.read().decode("utf-8", "replace")
        try:
            message = json.loads(text).get("error", text)
        except (ValueError, AttributeError):
            message = text
        raise ServingError(error.code, message) from None


def _model_url(host, port, model, version=None):
    url = f"http://{host}:{port}/v1/models/{model}"
    return url if version is None else f"{url}/versions/{version}"


def predict(
    texts,
    host="localhost",
    port=8501,
    model="translator",
    signature=None,
    request_format="instances",
    version=None,
    timeout=30.0,
):
    """Translates ``texts``: one dict per sentence (e.g. ``{"translation", "score"}``).

    Raises:
        ServingError: the server answered with an error (``.status``, ``.message``).
    """
    body = build_request(texts, signature, request_format)
    return parse_response(
        _call(_model_url(host, port, model, version) + ":predict", body, timeout)
    )


def model_status(
    host="localhost", port=8501, model="translator", version=None, timeout=10.0
):
    """GET /v1/models/NAME: ``{"model_version_status": [{"version", "state", ...}]}``"""
    return _call(_model_url(host, port, model, version), timeout=timeout)


def model_metadata(
    host="localhost", port=8501, model="translator", version=None, timeout=10.0
):
    """GET /v1/models/NAME/metadata: the signatures (``metadata.signature_def``)."""
    return _call(_model_url(host, port, model, version) + "/metadata", timeout=timeout)


def _format_row(row):
    if "translations" in row:
        return " | ".join(
            f"{t}\t{s:.4f}" for t, s in zip(row["translations"], row["scores"])
        )
    if "translation" in row:
        return f"{row['translation']}\t{row['score']:.4f}"
    return json.dumps(row, ensure_ascii=False)


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Query a TF Serving translator over REST."
    )
    parser.add_argument("--host", default="localhost")
    parser.add_argument("--port", type=int, default=8501)
    parser.add_argument("--model", default="translator", help="served model name")
    parser.add_argument(
        "--version",
        type=int,
        default=None,
        help="a specific version (default: the server's choice)",
    )
    parser.add_argument(
        "--signature",
        default=None,
        help="e.g. translate_nbest (default: serving_default)",
    )
    parser.add_argument(
        "--format",
        choices=("instances", "inputs"),
        default="instances",
        help="request form",
    )
    parser.add_argument(
        "--status",
        action="store_true",
        help="print the model's version status and exit",
    )
    parser.add_argument(
        "--metadata", action="store_true", help="print the signatures and exit"
    )
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument(
        "text", nargs="*", help="sentences (default: one per line on stdin)"
    )
    args = parser.parse_args(argv)
    try:
        if args.status or args.metadata:
            call = model_status if args.status else model_metadata
            print(
                json.dumps(
                    call(args.host, args.port, args.model, args.version), indent=2
                )
            )
            return 0
        texts = args.text or [line.rstrip("\n") for line in sys.stdin]
        rows = predict(
            texts,
            args.host,
            args.port,
            args.model,
            args.signature,
            args.format,
            args.version,
            args.timeout,
        )
    except (ServingError, OSError) as error:
        print(f"rest_client: {error}", file=sys.stderr)
        return 1
    for row in rows:
        print(_format_row(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
