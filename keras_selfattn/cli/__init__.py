"""The ``keras-selfattn`` command; its parser and commands are in
`keras_selfattn.cli.commands`."""

from keras_selfattn.cli.commands import (
    EXIT_NOT_TRANSLATING,
    INTERNAL_ERROR,
    INTERRUPTED,
    NATIVE_LOG_LINE,
    USAGE_ERROR,
    ModelConfig,
    TrainConfig,
    build_parser,
    main,
)

__all__ = [
    "EXIT_NOT_TRANSLATING",
    "INTERNAL_ERROR",
    "INTERRUPTED",
    "NATIVE_LOG_LINE",
    "USAGE_ERROR",
    "ModelConfig",
    "TrainConfig",
    "build_parser",
    "main",
]
