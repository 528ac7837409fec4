"""A trained run, read for use: the one reader that translate, evaluate and the
export share.

`load_translator(run_dir, settings)` is a run directory's `Translator`: a
`TrainedRun` checks that the directory holds a finished run, reads its
``config.json`` once and checks that its parts belong together
(`run_directory.consistency`), then gives each part the searches need: the
tokenizers, the vocabulary shortlist's table (``shortlist.npz``, which training
writes; this module only reads it and says how to make it when it is missing),
the model (under the policy the run asks for) and, from those, the
`Translator` of the search settings (`SearchSettings`: its precision, int8
weights and shortlist).

This is the application's side of translating; the library's side,
`keras_selfattn.translation` (`Translator` over a model and its tokenizers) and
`keras_selfattn.scoring` (`evaluate`), knows no run directory. Both are named
here too, so that one import serves a user of a trained run.
"""

import os
import pathlib
from typing import Any

from keras_selfattn import text
from keras_selfattn.models import output_layer, saving
from keras_selfattn.models.precision import Int8Weights, lower_precision_model
from keras_selfattn.run_directory.consistency import check_run_parts
from keras_selfattn.run_directory.layout import (
    CONFIG_FILE,
    MODEL_FILE,
    SHORTLIST_FILE,
    RunLayout,
)
from keras_selfattn.run_directory.settings import load_run_config
from keras_selfattn.scoring import evaluate, format_metrics
from keras_selfattn.search_settings import SearchSettings
from keras_selfattn.text.shortlist import DEFAULT_FREQUENT, ShortlistTable
from keras_selfattn.translation import Translation, Translator, source_ids_for_model

__all__ = [
    "ModelFileError",
    "SearchSettings",
    "TrainedRun",
    "Translation",
    "Translator",
    "evaluate",
    "format_metrics",
    "load_translator",
    "read_run_shortlist",
    "source_ids_for_model",
]


class ModelFileError(ValueError):
    """A run's ``model.keras`` that Keras could not load (`TrainedRun.model`).

    Keras raises what its loading code met (a TypeError for an argument a layer
    does not take, a ValueError, a KeyError or h5py's OSError for a damaged
    archive); this names the file, and the error Keras raised is its
    ``__cause__``.

    Attributes:
        path: the ``model.keras`` file.
    """

    def __init__(self, path: str | os.PathLike[str], error: BaseException) -> None:
        self.path = path
        if isinstance(error, saving.MissingClassError):  # its line names the file
            super().__init__(str(error))
            return
        super().__init__(f"cannot read {path}: {type(error).__name__}: {error}")


def _load_model(path: str | os.PathLike[str], dtype: str | None = None) -> Any:
    """`saving.load_model(path, dtype)`; what fails in it is a `ModelFileError`."""
    if dtype is not None:
        saving.check_dtype_policy(dtype)  # a bad name is not the file's fault
    try:
        return saving.load_model(path, dtype=dtype)
    except Exception as error:
        raise ModelFileError(path, error) from error


def _finished_run(run_dir: str | os.PathLike[str]) -> pathlib.Path:
    """``run_dir`` as a path, refused in one line when it is not a directory
    holding a model and its ``config.json``."""
    run_dir = pathlib.Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"Run directory not found: {run_dir}")
    missing = [
        name for name in (MODEL_FILE, CONFIG_FILE) if not (run_dir / name).exists()
    ]
    if missing:
        raise FileNotFoundError(
            f"{run_dir} is not a finished run directory: missing "
            f"{', '.join(missing)} (train a model into it with "
            "`keras-selfattn train`)"
        )
    return run_dir


def read_run_shortlist(
    run_dir: str | os.PathLike[str], frequent: int = DEFAULT_FREQUENT
) -> ShortlistTable:
    """The vocabulary shortlist's table a run keeps, ``RUN_DIR/shortlist.npz``,
    with its ``frequent`` most frequent target pieces; its ``record["source"]``
    names the file.

    Raises:
        FileNotFoundError: the run has no table; ValueError: the table keeps
            another number of frequent pieces (or is damaged). Each in one
            line saying how to make the table.
    """
    path = RunLayout(run_dir).shortlist
    make = f"keras-selfattn shortlist --model {run_dir}"
    if frequent != DEFAULT_FREQUENT:
        make += f" --frequent {frequent}"
    if not path.exists():
        raise FileNotFoundError(
            f"{run_dir} has no vocabulary shortlist ({SHORTLIST_FILE}; training "
            f"writes it): make it with `{make}`"
        )
    table = ShortlistTable.load(path)
    if table.record.get("frequent") != frequent:
        raise ValueError(
            f"{path} keeps the {table.record.get('frequent')} most frequent target "
            f"pieces, not {frequent}: make a table of {frequent} with `{make}`"
        )
    table.record["source"] = str(path)
    return table


class TrainedRun:
    """A finished run directory, checked and read once: each part on request.

    Args:
        run_dir: the run directory ``keras-selfattn train`` wrote.

    Attributes:
        layout: the run's `run_directory.layout.RunLayout`.
        model_config, train_config: the settings it was trained with
            (``config.json``).

    Raises:
        FileNotFoundError: not a run directory, or one without its model or
            ``config.json``.
        ValueError: a ``config.json`` that is not valid.
        RunPartsMismatch: the vocabularies are not the model's.

    Example (not run: it needs a trained run)::

        run = TrainedRun("runs/demo")
        translator = run.translator(SearchSettings(beam_size=4))
    """

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        run_dir = _finished_run(run_dir)
        self.layout = RunLayout(run_dir)
        self.model_config, self.train_config = load_run_config(self.layout.config)
        check_run_parts(self.layout.root)  # the vocabularies are the model's

    def tokenizer(self) -> text.PairTokenizer:
        """The run's source and target tokenizers."""
        return text.PairTokenizer.load(self.layout.root)

    def model(self, dtype: str | None = None) -> Any:
        """The run's ``model.keras``, under ``dtype`` (None: the policy it was
        trained with, but float32 for a run trained with
        ``mixed_precision="auto"``: that was the training machine's choice, and
        this one may lack bfloat16 units).

        Raises:
            ModelFileError: Keras could not load the file.
            ValueError: ``dtype`` is no Keras policy name.
        """
        if dtype is None and self.train_config.mixed_precision == "auto":
            dtype = "float32"
        return _load_model(self.layout.model, dtype)

    def translator(
        self, settings: SearchSettings | None = None, *, dtype: str | None = None
    ) -> Translator:
        """The run's `Translator`, searching with ``settings`` (default: greedy,
        float32): the model lowered to bfloat16, its int8 weights and the
        run's shortlist table as the settings ask; ``dtype`` as `model` takes it.

        Raises:
            FileNotFoundError, ValueError: the shortlist's table
                (`read_run_shortlist`).
            ModelFileError: Keras could not load ``model.keras``.
        """
        settings = SearchSettings() if settings is None else settings
        table = None
        if settings.shortlist is not None:
            table = read_run_shortlist(self.layout.root, settings.shortlist)
        model = self.model(dtype)
        if settings.precision == "bfloat16":
            model = lower_precision_model(model, output_layer.LOWER_PRECISION_PRODUCTS)
        int8_weights = None
        if settings.quantize == "int8":
            int8_weights = Int8Weights(model, output_layer.INT8_PRODUCTS)
        return Translator(
            model,
            self.tokenizer(),
            self.model_config.max_source_len,
            self.model_config.max_target_len,
            settings,
            shortlist_table=table,
            int8_weights=int8_weights,
        )


def load_translator(
    run_dir: str | os.PathLike[str],
    settings: SearchSettings | None = None,
    *,
    dtype: str | None = None,
    **fields: Any,
) -> Translator:
    """The `Translator` of a trained run directory (`TrainedRun.translator`).

    Args:
        run_dir: the run directory ``keras-selfattn train`` wrote.
        settings: a `SearchSettings`, or None: those of the ``fields`` keywords
            (e.g. ``load_translator(run_dir, precision="bfloat16",
            shortlist=50)``; default: greedy, float32).
        dtype: the policy the model computes under (`TrainedRun.model`).

    Raises:
        FileNotFoundError: not a run directory, or one without its files (the
            shortlist's table included, when asked for).
        ModelFileError: Keras could not load ``model.keras``.
        ValueError: a ``config.json``, tokenizer or shortlist file that is not
            valid, or a table of another size than ``settings.shortlist``.
        RunPartsMismatch: the vocabularies are not the model's.

    Example (not run: it needs a trained run)::

        translator = load_translator("runs/demo")
        [t.text for t in translator.translate(["14 juillet 1989"], beam_size=4)]
    """
    # Checked before anything is read.
    settings = SearchSettings.given("load_translator", settings, fields)
    run = TrainedRun(run_dir)
    return run.translator(settings, dtype=dtype)
