"""``keras-selfattn demo`` takes the advice its own refusal gives (``--overwrite``)."""

import inspect

from keras_selfattn.cli import build_parser
from keras_selfattn.jobs import run_demo
from keras_selfattn.training.resume import continuation


def test_demo_accepts_the_overwrite_its_refusal_advises():
    assert "--overwrite" in inspect.getsource(continuation)  # the advice given
    args = build_parser().parse_args(["demo", "--overwrite", "--out", "runs/x"])
    assert args.overwrite is True
    assert build_parser().parse_args(["demo"]).overwrite is False
    assert inspect.signature(run_demo).parameters["overwrite"].default is False
