"""Export a trained run as a SavedModel that TF Serving serves: text in, text out.

The steps, each in its own module: the signatures' graph code
(`keras_selfattn.serving.signatures`), the warmup records
(`keras_selfattn.serving.warmup`) and the atomic publishing of ``BASE/N``
(`keras_selfattn.serving.publishing`).

On disk, ``BASE/N/`` (TF Serving's layout: only purely numeric folder names are
versions) holds ``saved_model.pb``, ``variables/``, ``assets/`` (the source and
target vocabularies, one token a line, line number = id; an id -> token table
over each is initialized at load, so a missing vocabulary fails the load) and
``assets.extra/tf_serving_warmup_requests`` (requests built from sources of the
run's own test split).
"""

import os
import pathlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from keras_selfattn.search_settings import SearchSettings
from keras_selfattn.serving import export_report, publishing, warmup
from keras_selfattn.serving.publishing import (  # re-exported
    DEFAULT_MODEL_NAME,
)
from keras_selfattn.serving.signatures import (
    DEFAULT_GROUPS,
    NBEST_SIGNATURE,
    SERVING_SIGNATURE,
    TOKEN_IDS_SIGNATURE,
    build_export_archive,
    check_signatures,
)

if TYPE_CHECKING:  # annotations only: the module loads no model code at import
    from keras_selfattn.text import PairTokenizer
    from keras_selfattn.translation import Translator

__all__ = [
    "DEFAULT_MODEL_NAME",
    "XLA_WARMUP_BATCH_SIZES",
    "export_run",
    "export_translator",
    "sample_sources",
]

_NUM_WARMUP_TEXTS = 8
# The request sizes an XLA export's warmup runs: the allowed_batch_sizes of
# export/batching_parameters.txt (benchmarks/RESULTS.md, the XLA export's warmup).
XLA_WARMUP_BATCH_SIZES = (1, 2, 4, 8, 16, 32)
_NUM_FALLBACK_TOKENS = 3


# Long: mostly its docstring; then the export's steps in order, in one staging folder.
def export_translator(
    translator: "Translator",
    export_base: str | os.PathLike[str],
    version: int | None = None,
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    warmup_texts: Sequence[str] | None = None,
    xla: bool = False,
    groups: int = DEFAULT_GROUPS,
) -> pathlib.Path:
    """Writes ``export_base/N/`` atomically: a SavedModel with its warmup records.

    The served searches are the translator's: its `SearchSettings` (the beam
    of ``translate_nbest``, the length penalty and ratio, the shortlist, the
    precision and int8 weights), which the export's report records
    (`keras_selfattn.serving.export_report`).

    Args:
        translator: a `keras_selfattn.translation.Translator`.
        export_base: the model's base folder (what TF Serving's ``--model_base_path``
            or ``/models/NAME`` points at); created if missing.
        version: the version number N; None: one more than the highest present.
            An existing version is never overwritten.
        model_name: the served name, written into the warmup requests.
        warmup_texts: sample sentences for ``assets.extra/tf_serving_warmup_requests``
            (default: a few words of the source vocabulary, see `sample_sources`).
        xla: compile the searches with XLA (opt-in, never the default: a CPU
            ``tensorflow_model_server`` must then run with
            ``--xla_cpu_compilation_enabled=true``; see docs/serving.md).
        groups: each request's sentences are searched as this many length
            groups at once (`keras_selfattn.serving.signatures.in_length_groups`;
            no server flag, the same translations).

    Returns:
        The version folder, a `pathlib.Path`.

    Raises:
        FileExistsError: ``version`` is given and ``export_base/version`` exists
            or another process is writing it (`publishing.VersionTaken`).
    """
    if warmup_texts is None:
        warmup_texts = _vocabulary_sample(translator.tokenizer)
    with (
        publishing.claimed_version(export_base, version) as (number, automatic),
        publishing.staging_folder(export_base) as staging,
    ):
        saved_model_dir = staging / "saved_model"
        # The vocabulary files, copied into assets/ by the saver.
        archive = build_export_archive(
            translator,
            asset_dir=staging / "vocabularies",
            xla=xla,
            groups=groups,
        )
        archive.write_out(str(saved_model_dir), verbose=False)
        check_signatures(saved_model_dir)
        _write_warmup(saved_model_dir, translator, warmup_texts, model_name, xla)
        export_report.write_translator_report(saved_model_dir, translator)
        # Publish the SavedModel folder itself; the rest of the staging folder goes.
        return publishing.publish(saved_model_dir, export_base, number, automatic)


def _write_warmup(
    saved_model_dir: pathlib.Path,
    translator: "Translator",
    warmup_texts: Sequence[str],
    model_name: str,
    xla: bool,
) -> None:
    """Writes the warmup records: each text signature, and one token-ids step.

    For an ``xla`` export, each text signature at every size of
    `XLA_WARMUP_BATCH_SIZES`: XLA compiles the searches per batch size and
    source bucket, and TF Serving replays the records at load, so those
    compilations happen before the version serves, not on its first requests.
    """
    import numpy as np

    from keras_selfattn.decoding import START_ID

    texts = [
        t.decode("utf-8", "replace") if isinstance(t, bytes) else str(t)
        for t in warmup_texts
    ]
    source_ids = translator.encode_sources(texts[:1])[0].numpy()
    target_in = np.full([len(source_ids), 1], START_ID, np.int32)  # first step
    logs = warmup.warmup_requests_for_translation(
        texts,
        model_name,
        signatures=(SERVING_SIGNATURE, NBEST_SIGNATURE),
        batch_sizes=XLA_WARMUP_BATCH_SIZES if xla else None,
        token_ids=(
            TOKEN_IDS_SIGNATURE,
            {"source": source_ids, "target_in": target_in},
        ),
    )
    warmup.write_warmup_requests(saved_model_dir, logs)


def _vocabulary_sample(tokenizer: "PairTokenizer") -> list[str]:
    """A source text made of the first ordinary tokens of the source vocabulary."""
    import tensorflow as tf

    from keras_selfattn.text.vocab import RESERVED_TOKENS

    tokens = tokenizer.source.vocabulary.tokens[len(RESERVED_TOKENS) :]
    tokens = tf.constant(tokens[:_NUM_FALLBACK_TOKENS], tf.string)
    sample = tokenizer.source.detokenize(tokens).numpy().decode("utf-8")
    return [sample or "a"]  # "a": a vocabulary of reserved tokens only


def sample_sources(
    run_dir: str | os.PathLike[str],
    count: int = _NUM_WARMUP_TEXTS,
    tokenizer: "PairTokenizer | None" = None,
) -> list[str]:
    """A few source sentences the run's model knows: for warmup and example requests.

    The first sources of the run's test split, else of its validation or training
    split; a run without splits gives one text made of the first words of its
    source vocabulary. Reads at most ``count`` pairs.

    Args:
        run_dir: a run directory written by `keras_selfattn.training.train`.
        count: how many sources at most.
        tokenizer: the run's `keras_selfattn.text.PairTokenizer`, for the fallback
            (default: loaded from ``run_dir`` when needed).

    Returns:
        list of 1 to ``count`` str.
    """
    from keras_selfattn.run_directory.layout import (
        TEST_FILE,
        TRAIN_FILE,
        VALIDATION_FILE,
        RunLayout,
    )
    from keras_selfattn.text import PairTokenizer, read_pairs

    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count must be a positive integer. Received: count={count!r}")
    for name in (TEST_FILE, VALIDATION_FILE, TRAIN_FILE):
        path = RunLayout(run_dir).splits / name
        if path.is_file():
            sources = [
                source
                for source, _ in read_pairs(path, skip_malformed=True, max_pairs=count)
            ]
            if sources:
                return sources
    return _vocabulary_sample(tokenizer or PairTokenizer.load(run_dir))


# Long: mostly its docstring; one keyword a setting, passed on to export_translator.
def export_run(
    run_dir: str | os.PathLike[str],
    export_base: str | os.PathLike[str],
    version: int | None = None,
    settings: SearchSettings | None = None,
    *,
    model_name: str = DEFAULT_MODEL_NAME,
    warmup_texts: Sequence[str] | None = None,
    xla: bool = False,
    dtype: str | None = None,
    groups: int = DEFAULT_GROUPS,
    **search: Any,
) -> pathlib.Path:
    """Exports a run directory as ``export_base/N/`` (``keras-selfattn export``).

    Reads the run as `keras_selfattn.inference.load_translator` does (so the
    SavedModel translates exactly like ``keras-selfattn translate`` with the same
    settings), then calls `export_translator`.

    Args:
        run_dir: a run directory written by `keras_selfattn.training.train`.
        export_base: the model's base folder; versions go in numbered subfolders.
        version: N; None: one more than the highest present.
        settings: the served searches' `SearchSettings`, or None: those of
            the ``search`` keywords (its fields: ``beam_size``, the hypotheses
            ``translate_nbest`` returns; ``length_penalty``;
            ``max_length_ratio``: both served searches cap each sentence's
            steps relative to its source; ``shortlist``: N, each request
            searches over its sources' candidate target pieces plus the N
            most frequent, the run's ``shortlist.npz`` held in the graph as
            constants; ``precision``: ``"bfloat16"`` runs every product of the
            searches in bfloat16, fast on CPUs with avx512_bf16 or amx_bf16
            only; ``quantize``: ``"int8"`` stores the products' kernels as
            int8 with per-channel float32 scales, each request dequantizing
            them once before its search loop). Checked before anything is read.
        model_name: the served name (warmup requests; the ``docker run`` line).
        warmup_texts: sample sentences for the warmup records (default:
            `sample_sources` of the run).
        xla: compile the searches with XLA (see `export_translator`).
        groups: length groups searched at once per request (see
            `export_translator`).
        dtype: None: the served graph computes under the policy the model was
            trained with, except for a run whose ``mixed_precision`` was
            ``"auto"``: float32 (`inference.TrainedRun.model`'s ``dtype``);
            ``"float32"`` (or another Keras policy name): under that one, the
            same weights.
            A ``mixed_bfloat16`` run served on CPUs without bfloat16 units
            wants ``"float32"``: they emulate bfloat16 products, slower than
            float32's.

    Returns:
        The version folder, a `pathlib.Path`.

    Example (not run: it needs a trained run)::

        version_dir = export_run("runs/demo", "exports/translator")  # .../1
    """
    from keras_selfattn.inference import load_translator

    # Checked before any loading.
    settings = SearchSettings.given("export_run", settings, search)
    # A version that exists or is being written is refused before the model loads.
    publishing.resolve_version(export_base, version)
    translator = load_translator(run_dir, settings, dtype=dtype)
    if warmup_texts is None:
        warmup_texts = sample_sources(run_dir, tokenizer=translator.tokenizer)
    return export_translator(
        translator,
        export_base,
        version,
        model_name=model_name,
        warmup_texts=warmup_texts,
        xla=xla,
        groups=groups,
    )
