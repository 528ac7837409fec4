"""Translating text with a model and its tokenizer: `Translator`, `Translation`.

The text a user gets: sources tokenized, decoded in the graph
(`keras_selfattn.decoding`, greedy or beam) and detokenized by the target
tokenizer, the same code the exported model serves.

On any Keras backend the searches run (TensorFlow, JAX): the tokenizers are
TensorFlow graph code whatever the backend (tf.text), so `Translator` tokenizes
with TensorFlow, hands the ids to the search as NumPy arrays, and detokenizes the
NumPy ids the search returns with TensorFlow again. A run trained under
TensorFlow translates the same under JAX.

Why here, below `keras_selfattn.training` and not in `keras_selfattn.inference`:
validation during training translates a sample of the validation pairs
(`training.watch`), and import direction follows the data (text -> model ->
training -> inference -> serving -> command line), so what validation needs sits
on `decoding`, `models`' outputs, `text` and `run_directory` only.
`keras_selfattn.inference` is the public name of this module's classes (and of
`keras_selfattn.scoring`'s `evaluate`).
"""

import contextlib
import dataclasses
import os
import pathlib
from collections.abc import Iterable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.decoding import (
    DEFAULT_LENGTH_PENALTY,
    beam_search_decode,
    greedy_decode,
)
from keras_selfattn.decoding.loop import check_max_length_ratio
from keras_selfattn.models import output_layer, saving
from keras_selfattn.models.precision import Int8Weights, lower_precision_model
from keras_selfattn.run_directory.consistency import check_run_parts
from keras_selfattn.run_directory.layout import CONFIG_FILE, MODEL_FILE
from keras_selfattn.run_directory.settings import load_run_config

__all__ = [
    "ModelFileError",
    "Translation",
    "Translator",
    "source_ids_for_model",
]


class ModelFileError(ValueError):
    """A run's ``model.keras`` that Keras could not load (`Translator.load`).

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


@dataclasses.dataclass
class Translation:
    """One translated sentence.

    Attributes:
        source: the input text.
        text: the translation, detokenized by the target tokenizer's graph code
            (`Tokenizer.decode`, the same ops the exported ``serving_default``
            runs), so it has the case, digits and spacing the model wrote; ""
            for an input with no tokens.
        score: log-probability of the translation (beam: length-normalized).
        source_tokens: the source tokens the model saw (after truncation).
        target_tokens: the produced tokens, the end token included ("word" and
            "subword" tokens glued to the previous one start with
            `keras_selfattn.text.tokenizers.JOINER`).
        attention: (len(target_tokens), len(source_tokens)) weights (greedy only,
            when asked for), else None.
        truncated: True when the source was longer than the model's maximum.
    """

    source: str
    text: str
    score: float
    source_tokens: list[str]
    target_tokens: list[str]
    attention: np.ndarray | None = None
    truncated: bool = False


def source_ids_for_model(ids: Any, max_source_len: int) -> tuple[Any, Any]:
    """Ragged source token ids -> the model's ``source`` input (graph code).

    The one home of this step for `Translator.encode_sources` and the exported
    serving signatures (`keras_selfattn.serving.signatures`).

    Args:
        ids: integer `tf.RaggedTensor` (B, None), e.g. ``tokenizer.source.encode``.
        max_source_len: longer rows are truncated to this many tokens.

    Returns:
        ``(ids, lengths)``: int32 (B, T) ids padded with ``PAD_ID``, T the longest
        row after truncation and at least 1 (a batch of empty texts keeps one
        padding column); int64 (B,) token counts before truncation.
    """
    lengths = ids.row_lengths()
    ids = ids[:, :max_source_len].to_tensor(default_value=text.PAD_ID)
    ids = tf.pad(ids, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(ids)[1])]])
    return tf.cast(ids, tf.int32), lengths


class Translator:
    """Translates text with a trained model and its tokenizer.

    Args:
        model: a `build_seq2seq` model.
        tokenizer: the run's `text.PairTokenizer`.
        max_source_len: longer sources are truncated to this many tokens.
        max_target_len: the most target tokens produced (the end token excluded).
        precision: the searches' products, ``"float32"`` or ``"bfloat16"``
            (see `load`).
        shortlist: None, or the vocabulary shortlist's table (see `load`).
        int8_weights: None, or the product kernels held as int8 (see `load`).
        max_length_ratio: None (default: off), or a finite float R > 0: every
            search caps each sentence's steps relative to its source, with
            ``max_target_len + 1`` as ``max_len``
            (`keras_selfattn.decoding.decode`'s ``max_length_ratio``).

    Example:

        translator = Translator.load("runs/demo")
        [t.text for t in translator.translate(["14 juillet 1989"], beam_size=4)]
    """

    def __init__(
        self,
        model: keras.Model,
        tokenizer: text.PairTokenizer,
        max_source_len: int,
        max_target_len: int,
        precision: str = "float32",
        shortlist: Any = None,
        int8_weights: Int8Weights | None = None,
        max_length_ratio: float | None = None,
    ) -> None:
        output_layer.check_search_options(precision)
        max_length_ratio = check_max_length_ratio(max_length_ratio)
        own_output = (
            precision != "float32" or shortlist is not None or int8_weights is not None
        )
        if own_output and keras.config.backend() != "tensorflow":
            raise ValueError(
                "precision and shortlist run on the TensorFlow backend only. "
                f"Received: backend={keras.config.backend()!r}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        # The search's output layer: its product's precision and the table of
        # the vocabulary shortlist (`keras_selfattn.models.output_layer`).
        self.precision = precision
        self.shortlist = shortlist
        # The model's product kernels held as int8, read dequantized by each
        # search (`keras_selfattn.models.precision.Int8Weights`), or None.
        self.int8_weights = int8_weights
        # Each sentence's cap of steps relative to its source, or None.
        self.max_length_ratio = max_length_ratio
        self._searches: dict[tuple[int, float, bool, float | None], Any] = {}

    # Long: mostly its docstring (what each option loads).
    @classmethod
    def load(
        cls,
        run_dir: str | os.PathLike[str],
        dtype: str | None = None,
        precision: str = "float32",
        quantize: str | None = None,
        shortlist: Any = None,
        max_length_ratio: float | None = None,
    ) -> "Translator":
        """Loads ``model.keras``, the vocabularies and ``config.json`` of a run
        directory.

        Args:
            run_dir: the run directory ``keras-selfattn train`` wrote.
            dtype: None (default): the model computes under the policy it was
                trained with, except a run trained with
                ``mixed_precision="auto"``: float32 (the training machine chose
                bfloat16 for its own speed; this one may lack the units, and
                served at batch 32 bfloat16 was no faster even where they
                exist), so that such a run translates alike wherever it is
                loaded, served or not; a policy name such as ``"float32"``:
                under that one (`keras_selfattn.models.saving.with_dtype_policy`),
                e.g. a bfloat16 run on a CPU without bfloat16 units.

        Returns:
            A `Translator` of the run's model and tokenizers.

        Raises:
            FileNotFoundError: not a run directory, or one without its files.
            ModelFileError: Keras could not load ``model.keras``.
            ValueError: a ``config.json`` or tokenizer file that is not valid.
            RunPartsMismatch: the vocabularies are not the model's.

        ``precision``: ``"bfloat16"``: every product in bfloat16 (the model's
        product layers, `models.precision.lower_precision_model`; the output
        layer's in the search), element-wise work, softmaxes and scores float32;
        what ``keras-selfattn export --precision bfloat16`` serves. ``quantize``:
        None, or ``"int8"``: the products' kernels held as int8 with
        per-channel scales and dequantized once per search, before its loop
        (`models.precision.Int8Weights`; what ``--quantize int8`` exports).
        ``shortlist``: a
        `text.shortlist.ShortlistTable` (``training.data.run_shortlist``): each
        batch searches over its sources' candidate target pieces only.
        ``max_length_ratio``: None, or each search's cap of steps relative to
        a sentence's source (see `Translator`; ``--max-length-ratio``).
        """
        precision, quantize = output_layer.check_search_options(precision, quantize)
        max_length_ratio = check_max_length_ratio(max_length_ratio)
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
        model_config, train_config = load_run_config(run_dir / CONFIG_FILE)
        check_run_parts(run_dir)  # the vocabularies are the model's
        if dtype is None and train_config.mixed_precision == "auto":
            dtype = "float32"
        model = _load_model(run_dir / MODEL_FILE, dtype)
        tokenizer = text.PairTokenizer.load(run_dir)
        if precision == "bfloat16":
            model = lower_precision_model(model, output_layer.LOWER_PRECISION_PRODUCTS)
        int8_weights = None
        if quantize == "int8":
            int8_weights = Int8Weights(model, output_layer.INT8_PRODUCTS)
        return cls(
            model,
            tokenizer,
            model_config.max_source_len,
            model_config.max_target_len,
            precision=precision,
            shortlist=shortlist,
            int8_weights=int8_weights,
            max_length_ratio=max_length_ratio,
        )

    @property
    def _searches_own_output(self) -> bool:
        return (
            self.precision != "float32"
            or self.shortlist is not None
            or self.int8_weights is not None
        )

    def weights_held(self) -> Any:
        """A context in which the model reads its int8 weights dequantized
        (computed on entry: once per request in a graph); nothing without."""
        if self.int8_weights is None:
            return contextlib.nullcontext()
        return self.int8_weights.held()

    def search(
        self,
        source_ids: Any,
        beam_size: int = 1,
        alpha: float = DEFAULT_LENGTH_PENALTY,
        return_attention: bool = False,
    ) -> dict[str, Any]:
        """The greedy (``beam_size`` 1) or beam search's result for ``source_ids``
        (int32 (B, T)), in this translator's output layer (its precision and
        shortlist: `keras_selfattn.models.output_layer.OutputLayer`) and its
        ``max_length_ratio``, with each step's attention weights under
        ``return_attention`` (greedy only).

        Graph code, for a served signature or a `tf.function`: built inside, the
        shortlist is computed from the request's ``source_ids``.
        """
        shortlist = None
        if self.shortlist is not None:
            shortlist = (self.shortlist.candidates, self.shortlist.always)
        max_len = self.max_target_len + 1
        output = output_layer.search_output(shortlist, self.precision)
        ratio = self.max_length_ratio
        with self.weights_held():
            if beam_size == 1:
                return greedy_decode(
                    self.model,
                    source_ids,
                    max_len,
                    return_attention=return_attention,
                    output=output,
                    max_length_ratio=ratio,
                )
            return beam_search_decode(
                self.model,
                source_ids,
                beam_size,
                max_len,
                alpha=alpha,
                output=output,
                max_length_ratio=ratio,
            )

    def _own_output_search(
        self, ids: Any, beam_size: int, alpha: float, return_attention: bool
    ) -> Any:
        """`search` as one `tf.function` per beam size, alpha, attention and
        length ratio."""
        settings = (int(beam_size), float(alpha), bool(return_attention))
        key = (*settings, self.max_length_ratio)
        if key not in self._searches:
            self._searches[key] = tf.function(
                lambda source_ids: self.search(source_ids, *settings),
                input_signature=[tf.TensorSpec([None, None], tf.int32)],
                autograph=False,
            )
        return self._searches[key](ids)

    def encode_sources(self, texts: Iterable[str]) -> tuple[Any, list[list[str]], Any]:
        """Texts -> (padded int32 ids (B, T), token strings per text, truncated
        flags).

        Args:
            texts: the source texts.

        Returns:
            ``(ids, tokens, truncated)``: int32 ids ``(B, T)`` (`tf.Tensor`), the
            source tokens the model sees per text, and a bool NumPy array ``(B,)``,
            True where a text was longer than ``max_source_len``.
        """
        strings = tf.constant(list(texts), dtype=tf.string)
        tokens = self.tokenizer.source.tokenize(
            strings
        )  # tokenized once: ids come from the tokens
        ids, lengths = source_ids_for_model(
            self.tokenizer.source.vocabulary.token_to_id(tokens), self.max_source_len
        )
        token_lists = [
            [t.decode("utf-8") for t in row[: self.max_source_len]]
            for row in tokens.to_list()
        ]
        return ids, token_lists, lengths.numpy() > self.max_source_len

    def translate(
        self,
        texts: Iterable[str],
        beam_size: int = 1,
        return_attention: bool = False,
        alpha: float = DEFAULT_LENGTH_PENALTY,
        batch_size: int = 256,
    ) -> list[Translation]:
        """Translates a list of strings.

        Args:
            texts: list of str. An empty string (or one with no tokens) translates
                to "" with score 0; a text longer than the model's maximum is
                truncated (``Translation.truncated``).
            beam_size: 1 for greedy search, more for beam search.
            return_attention: keep each sentence's attention weights (greedy only).
            alpha: beam search length-normalization strength.
            batch_size: sentences decoded together.

        Returns:
            list of `Translation`, one per text.
        """
        if isinstance(texts, str):
            raise TypeError(
                "translate expects a list of strings. Received: a single str"
            )
        if beam_size < 1:
            raise ValueError(
                f"beam_size must be at least 1. Received: beam_size={beam_size}"
            )
        if return_attention and beam_size > 1:
            raise ValueError(
                "return_attention is available with greedy search (beam_size=1) only"
            )
        results = []
        texts = list(texts)
        for start in range(0, len(texts), batch_size):
            results.extend(
                self._translate_batch(
                    texts[start : start + batch_size],
                    beam_size,
                    return_attention,
                    alpha,
                )
            )
        return results

    def _search_batch(
        self, ids: Any, beam_size: int, return_attention: bool, alpha: float
    ) -> Any:
        """The search's result for a batch's ids (greedy or beam)."""
        if self._searches_own_output:
            return self._own_output_search(ids, beam_size, alpha, return_attention)
        max_len = self.max_target_len + 1
        ratio = self.max_length_ratio
        if beam_size == 1:
            return greedy_decode(
                self.model,
                ids,
                max_len,
                return_attention=return_attention,
                max_length_ratio=ratio,
            )
        return beam_search_decode(
            self.model, ids, beam_size, max_len, alpha=alpha, max_length_ratio=ratio
        )

    def _translate_batch(
        self,
        texts: list[str],
        beam_size: int,
        return_attention: bool,
        alpha: float,
    ) -> list[Translation]:
        ids, source_tokens, truncated = self.encode_sources(texts)
        if keras.config.backend() != "tensorflow":
            ids = ids.numpy()  # TensorFlow's ids to the search's backend
        out = self._search_batch(ids, beam_size, return_attention, alpha)
        if beam_size == 1:
            best, scores, lengths = out["ids"], out["scores"], out["lengths"]
        else:
            best, scores, lengths = (
                out["ids"][:, 0],
                out["scores"][:, 0],
                out["lengths"][:, 0],
            )
        best, scores, lengths = (
            keras.ops.convert_to_numpy(x) for x in (best, scores, lengths)
        )
        decoded = self.tokenizer.target.decode(best).numpy()
        vocabulary = self.tokenizer.target.vocabulary.tokens
        results = []
        for i, source in enumerate(texts):
            if not source_tokens[i]:
                results.append(Translation(source, "", 0.0, [], [], None, False))
                continue
            produced = [vocabulary[t] for t in best[i, : lengths[i]]]
            attention = None
            if return_attention:
                attention = keras.ops.convert_to_numpy(out["attention"])[
                    i, : lengths[i], : len(source_tokens[i])
                ]
            results.append(
                Translation(
                    source,
                    decoded[i].decode("utf-8"),
                    float(scores[i]),
                    source_tokens[i],
                    produced,
                    attention,
                    bool(truncated[i]),
                )
            )
        return results
