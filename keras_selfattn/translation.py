"""Translating text with a model and its tokenizer: `Translator`, `Translation`.

The text a user gets: sources tokenized, decoded in the graph
(`keras_selfattn.decoding`, greedy or beam) and detokenized by the target
tokenizer, the same code the exported model serves.

On any Keras backend the searches run (TensorFlow, JAX): the tokenizers are
TensorFlow graph code whatever the backend (tf.text), so `Translator` tokenizes
with TensorFlow, hands the ids to the search as NumPy arrays, and detokenizes the
NumPy ids the search returns with TensorFlow again. A run trained under
TensorFlow translates the same under JAX.

This is the library's side: a `Translator` is made from a model and its
tokenizers, and knows no run directory; `keras_selfattn.inference` reads a
trained run into one (`load_translator`). Validation during training makes one
of the model it trains.
"""

import contextlib
import dataclasses
from collections.abc import Iterable
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from keras_selfattn import text
from keras_selfattn.decoding import search_with
from keras_selfattn.models import output_layer
from keras_selfattn.models.precision import Int8Weights
from keras_selfattn.search_settings import SearchSettings
from keras_selfattn.text.shortlist import ShortlistTable

__all__ = [
    "Translation",
    "Translator",
    "source_ids_for_model",
]


def _check_loaded_parts(
    settings: SearchSettings,
    shortlist_table: ShortlistTable | None,
    int8_weights: Int8Weights | None,
) -> None:
    """The shortlist's table and the int8 weights are given exactly when the
    settings ask for them; else a one-line ValueError naming both."""
    if (settings.shortlist is None) != (shortlist_table is None):
        raise ValueError(
            "shortlist_table is given exactly when settings.shortlist is. Received: "
            f"settings.shortlist={settings.shortlist!r}, shortlist_table="
            f"{'None' if shortlist_table is None else 'a table'}"
        )
    if (settings.quantize is None) != (int8_weights is None):
        raise ValueError(
            "int8_weights are given exactly when settings.quantize is. Received: "
            f"settings.quantize={settings.quantize!r}, int8_weights="
            f"{'None' if int8_weights is None else 'Int8Weights'}"
        )


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
    """Translates text with a trained model and its tokenizers.

    Args:
        model: a `build_seq2seq` model.
        tokenizer: the model's `text.PairTokenizer`.
        max_source_len: longer sources are truncated to this many tokens.
        max_target_len: the most target tokens produced (the end token excluded).
        settings: the searches' `SearchSettings` (default: greedy, float32, the
            whole vocabulary, no length cap); ``translate``'s ``beam_size`` and
            ``alpha`` override its search for one call.
        shortlist_table: the vocabulary shortlist's table
            (`text.shortlist.ShortlistTable`), given exactly when
            ``settings.shortlist`` is (`inference.load_translator` reads the
            run's).
        int8_weights: the product kernels held as int8
            (`models.precision.Int8Weights`), given exactly when
            ``settings.quantize`` is ``"int8"`` (`inference.load_translator`
            makes them).

    Example (a trained run's: `keras_selfattn.inference.load_translator`):

        translator = Translator(model, tokenizer, max_source_len=40, max_target_len=40)
        [t.text for t in translator.translate(["14 juillet 1989"], beam_size=4)]
    """

    def __init__(
        self,
        model: keras.Model,
        tokenizer: text.PairTokenizer,
        max_source_len: int,
        max_target_len: int,
        settings: SearchSettings | None = None,
        *,
        shortlist_table: ShortlistTable | None = None,
        int8_weights: Int8Weights | None = None,
    ) -> None:
        settings = SearchSettings() if settings is None else settings
        _check_loaded_parts(settings, shortlist_table, int8_weights)
        if settings.own_output and keras.config.backend() != "tensorflow":
            raise ValueError(
                "precision and shortlist run on the TensorFlow backend only. "
                f"Received: backend={keras.config.backend()!r}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.max_source_len = max_source_len
        self.max_target_len = max_target_len
        self.settings = settings
        # The table of the vocabulary shortlist (`keras_selfattn.models.output_layer`).
        self.shortlist_table = shortlist_table
        # The model's product kernels held as int8, read dequantized by each
        # search (`keras_selfattn.models.precision.Int8Weights`), or None.
        self.int8_weights = int8_weights
        self._searches: dict[tuple[SearchSettings, bool], Any] = {}

    def weights_held(self) -> Any:
        """A context in which the model reads its int8 weights dequantized
        (computed on entry: once per request in a graph); nothing without."""
        if self.int8_weights is None:
            return contextlib.nullcontext()
        return self.int8_weights.held()

    def search_output(self, bucketed: bool = False) -> Any:
        """The searches' output layer spec (`output_layer.search_output`: the
        shortlist's table and the precision), None for the model's own;
        ``bucketed``: a shortlist's width padded for XLA."""
        table = self.shortlist_table
        shortlist = None if table is None else (table.candidates, table.always)
        return output_layer.search_output(
            shortlist, self.settings.precision, bucketed=bucketed
        )

    def search(
        self,
        source_ids: Any,
        settings: SearchSettings | None = None,
        return_attention: bool = False,
        jit_compile: bool = False,
    ) -> dict[str, Any]:
        """The search ``settings`` names (default: this translator's) of
        ``source_ids`` (int32 (B, T)), in this translator's output layer (its
        shortlist and precision, `search_output`) and int8 weights, with each
        step's attention weights under ``return_attention`` (greedy only).

        Graph code, for a served signature or a `tf.function`: built inside, the
        shortlist is computed from the request's ``source_ids``.
        """
        settings = self.settings if settings is None else settings
        with self.weights_held():
            return search_with(
                self.model,
                source_ids,
                settings,
                self.max_target_len + 1,
                output=self.search_output(bucketed=jit_compile),
                jit_compile=jit_compile,
                return_attention=return_attention,
            )

    def _own_output_search(
        self, ids: Any, settings: SearchSettings, return_attention: bool
    ) -> Any:
        """`search` as one `tf.function` per settings and attention."""
        key = (settings, bool(return_attention))
        if key not in self._searches:
            self._searches[key] = tf.function(
                lambda source_ids: self.search(source_ids, *key),
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
        beam_size: int | None = None,
        return_attention: bool = False,
        alpha: float | None = None,
        batch_size: int = 256,
    ) -> list[Translation]:
        """Translates a list of strings.

        Args:
            texts: list of str. An empty string (or one with no tokens) translates
                to "" with score 0; a text longer than the model's maximum is
                truncated (``Translation.truncated``).
            beam_size: None: the settings' search; 1 for greedy search, more
                for beam search (`SearchSettings.with_beam`).
            return_attention: keep each sentence's attention weights (greedy only).
            alpha: None: the settings' ``length_penalty``; else beam search's
                length-normalization strength.
            batch_size: sentences decoded together.

        Returns:
            list of `Translation`, one per text.
        """
        if isinstance(texts, str):
            raise TypeError(
                "translate expects a list of strings. Received: a single str"
            )
        settings = self.settings_for(beam_size, alpha)
        if return_attention and settings.search != "greedy":
            raise ValueError(
                "return_attention is available with greedy search (beam_size=1) only"
            )
        results = []
        texts = list(texts)
        for start in range(0, len(texts), batch_size):
            results.extend(
                self._translate_batch(
                    texts[start : start + batch_size], settings, return_attention
                )
            )
        return results

    def settings_for(
        self, beam_size: int | None = None, alpha: float | None = None
    ) -> SearchSettings:
        """This translator's settings, with ``beam_size`` (`with_beam`) and
        ``alpha`` (``length_penalty``) where given."""
        settings = self.settings
        if beam_size is not None:
            settings = settings.with_beam(beam_size)
        if alpha is not None:
            settings = settings.replace(length_penalty=alpha)
        return settings

    def _search_batch(
        self, ids: Any, settings: SearchSettings, return_attention: bool
    ) -> Any:
        """The search's result for a batch's ids."""
        if settings.own_output:
            return self._own_output_search(ids, settings, return_attention)
        return self.search(ids, settings, return_attention)

    def _translate_batch(
        self, texts: list[str], settings: SearchSettings, return_attention: bool
    ) -> list[Translation]:
        ids, source_tokens, truncated = self.encode_sources(texts)
        if keras.config.backend() != "tensorflow":
            ids = ids.numpy()  # TensorFlow's ids to the search's backend
        out = self._search_batch(ids, settings, return_attention)
        if settings.search == "greedy":
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
