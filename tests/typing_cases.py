"""Calls of the public API that its type hints must refuse: ``./run.sh lint`` runs
mypy over this file (pyproject.toml's [tool.mypy] lists it).

Each wrong call carries ``# type: ignore[CODE]`` for the error it must raise. With
``warn_unused_ignores`` an ignore that mypy does not need is an error itself, so
the lint step fails when a signature stops catching the mistake (a hint loosened
to ``Any``, a module no longer checked). Never run, and not a test module.
"""

from keras_selfattn.config.model_config import ModelConfig
from keras_selfattn.layers.positional_encoding import PositionalEncoding
from keras_selfattn.models.seq2seq import build_seq2seq
from keras_selfattn.serving.export import export_run
from keras_selfattn.translation import Translator


def wrong_calls(translator: Translator) -> None:
    PositionalEncoding(num_hiddens="32")  # type: ignore[arg-type]
    ModelConfig(num_heads=4.0)  # type: ignore[arg-type]
    build_seq2seq("200", 20)  # type: ignore[arg-type]
    translator.translate(["14 juillet 1989"], beam_size="4")  # type: ignore[arg-type]
    export_run("runs/demo", "exports", version="1")  # type: ignore[arg-type]


def right_calls(translator: Translator) -> None:
    """The same calls, right: mypy passes them (no ignore needed)."""
    PositionalEncoding(num_hiddens=32)
    ModelConfig(num_heads=4)
    build_seq2seq(200, 20)
    translator.translate(["14 juillet 1989"], beam_size=4)
    export_run("runs/demo", "exports", version=1)
