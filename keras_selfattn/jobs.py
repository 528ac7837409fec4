"""The jobs the command line runs that are more than one library call.

Each calls the library modules its work lives in; where a command's work is
one library function, the command calls that function itself
(``training.train``, ``inference.load_translator``,
``training.checkpoint_averaging.average_run``, ``serving.export_run``,
``serving.check_serving``, ``training.data.run_shortlist.learn_run_shortlist``):

- `build_vocab`: the vocabularies of a corpus (``text.learn_vocab``);
- `report` (``training.train``'s ``on_finished`` on the chief;
  `print_worker_summary` on another worker): a trained run's test metrics and
  figures, written before the run is marked finished;
- `translate_stream`: translations of a run's model (``inference.Translator``),
  a batch of lines at a time, each batch written at once;
- `evaluate_run` and `print_metrics`: chrF, BLEU and exact match of a run
  (``inference.evaluate``);
- `serving_lines`: the lines that serve an export;
- `run_demo`: all of the above on the bundled dates corpus.

The distillation jobs (a teacher's translations of a corpus, resumable and
sharded) live in `keras_selfattn.distillation`: `translate_pairs`, `merge_shards`.
"""

import contextlib
import json
import pathlib
import tempfile

from keras_selfattn import plotting, serving, training
from keras_selfattn.inference import (
    Translator,
    evaluate,
    format_metrics,
    load_translator,
)
from keras_selfattn.models import ModelConfig
from keras_selfattn.run_directory.history import history_columns, read_history
from keras_selfattn.run_directory.layout import (
    ATTENTION_PLOT_FILE,
    EXPORT_DIR,
    HISTORY_PLOT_FILE,
    PLOTS_DIR,
    POSITIONAL_ENCODING_PLOT_FILE,
    TOKENIZER_CONFIG_FILE,
    RunLayout,
)
from keras_selfattn.run_directory.metrics import write_metrics
from keras_selfattn.stopping import raise_if_swallowed
from keras_selfattn.text.corpus import iter_pairs
from keras_selfattn.text.tokenizers import JOINER
from keras_selfattn.training import TrainConfig

DEMO_MODEL_CONFIG = ModelConfig(
    num_hiddens=64,
    num_heads=4,
    num_layers=2,
    ffn_hiddens=128,
    dropout=0.1,
    decoder_units=128,
    embedding_dim=32,
    max_source_len=32,
    max_target_len=16,
)
DEMO_TRAIN_CONFIG = TrainConfig(
    epochs=4,
    batch_size=64,
    learning_rate=2e-3,
    warmup_steps=200,
    patience=2,
    source_tokenizer="word",
    target_tokenizer="char",
    split_digits=True,
)


def build_vocab(data, out_dir, train_config=None, *, overwrite=False, verbose=True):
    """Learns a run's vocabularies from pair files, in memory bounded by the vocabulary.

    The first ``train_config.vocab_sample_lines`` pairs of ``data`` (files
    interleaved as `train` reads them) are tokenized inside ``tf.data`` with
    the tokenizer options of ``train_config`` and counted
    (`text.learn_vocab.learn_pair_tokenizer`); ``out_dir`` receives the
    vocabulary files and ``tokenizer.json`` a run directory holds, for
    ``train(..., vocab=out_dir)`` / ``keras-selfattn train --vocab OUT_DIR``.

    Args:
        data: pair file(s) or glob pattern(s).
        out_dir: the directory to write.
        train_config: a `TrainConfig` (only its ``VOCAB_FIELDS`` matter).
        overwrite: replace vocabularies already in ``out_dir``.
        verbose: print each side's size and how long learning it took (wall
            and CPU time).

    Returns:
        The `text.PairTokenizer`.
    """
    from keras_selfattn.text import learn_vocab
    from keras_selfattn.training.data.run_tokenizer import tokenizer_configs

    train_config = train_config or TrainConfig()
    out_dir = _vocab_directory(out_dir, overwrite)
    pairs = _vocab_pairs(data, train_config)
    _check_writable(out_dir)
    with _naming_malformed_lines():
        tokenizer = learn_vocab.learn_pair_tokenizer(
            pairs(),
            *tokenizer_configs(train_config),
            sample_lines=train_config.vocab_sample_lines,
            on_learned=_print_learned if verbose else None,
        )
    tokenizer.save(out_dir)
    if verbose:
        print(
            f"{out_dir}: source vocabulary {tokenizer.source_vocab_size} tokens, "
            f"target {tokenizer.target_vocab_size} (from at most "
            f"{train_config.vocab_sample_lines} pairs)"
        )
        _print_sample_counts(pairs, train_config)
    return tokenizer


def _vocab_directory(out_dir, overwrite):
    """``out_dir`` as a path, refused when empty or (without ``overwrite``) when
    it already holds vocabularies."""
    if not str(out_dir).strip():  # before Path(), which reads "" as "."
        raise ValueError(f"out_dir must name a directory. Received: {str(out_dir)!r}")
    out_dir = pathlib.Path(out_dir)
    if (out_dir / TOKENIZER_CONFIG_FILE).exists() and not overwrite:
        raise ValueError(
            f"{out_dir} already holds vocabularies; choose another directory or pass "
            "--overwrite (overwrite=True)"
        )
    return out_dir


def _check_writable(out_dir):
    """``out_dir`` created and written to (a temporary file), before learning,
    which reads up to ``vocab_sample_lines`` pairs: a directory that cannot be
    written fails now, not after that."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out_dir, prefix="tmp-writable-"):
            pass
    except OSError as error:
        raise OSError(
            f"--out {out_dir} (out_dir) cannot be written "
            f"({error.strerror or error}); the vocabularies are written there: "
            "choose another directory",
        ) from None


def _vocab_pairs(data, train_config):
    """``read(counters=None)``: a fresh stream of the pairs of ``data``."""
    from keras_selfattn.text import stream

    files = stream.resolve_data_files(data)

    def read(counters=None):
        return stream.pair_stream(
            files,
            skip_malformed=train_config.skip_malformed,
            strict_columns=train_config.strict_columns,
            counters=counters,
        )

    return read


@contextlib.contextmanager
def _naming_malformed_lines():
    """A malformed line read inside the block fails as FILE:LINE, as train says it."""
    from keras_selfattn.text import stream

    try:
        yield
    except Exception as error:
        malformed = stream.malformed_line_error(error)
        if malformed is None:
            raise
        raise malformed from None


def _print_learned(side, tokenizer, seconds, cpu_seconds):
    """One side's vocabulary: its size, how it was learned, how long it took."""
    how = tokenizer.config.kind
    if tokenizer.config.sentencepiece_model is not None:
        how = f"sentencepiece model {tokenizer.config.sentencepiece_model}"
    print(
        f"{side} vocabulary: {tokenizer.vocab_size} tokens ({how}) in "
        f"{seconds:.1f} s (CPU {cpu_seconds:.1f} s)",
        flush=True,
    )


def _print_sample_counts(pairs, train_config):
    """Malformed lines skipped and extra columns in the sample learned from.

    Learning reads the stream three times; one more pass counts each line once.
    """
    from keras_selfattn.text import stream

    counters = stream.StreamCounters.create()
    sample = pairs(counters).take(train_config.vocab_sample_lines)
    sample.reduce(0, lambda n, _: n)
    counts = counters.values()
    if train_config.skip_malformed:
        print(f"{counts['malformed']} malformed lines skipped")
    if counts["extra_columns"]:
        print(stream.extra_columns_report(counts["extra_columns"]))


def report(result, num_heatmaps=4, beam_size=1, verbose=True, figures=True):
    """Evaluates a `TrainResult` on its test split; writes metrics.json and the figures.

    Args:
        figures: draw the figures into ``RUN_DIR/plots`` (needs matplotlib); False
            writes the metrics only, and matplotlib is never imported.

    Returns:
        the metrics dict (also in ``RUN_DIR/metrics.json``).
    """
    run_dir = pathlib.Path(result.run_dir)
    translator = Translator(
        result.model,
        result.tokenizer,
        result.model_config.max_source_len,
        result.model_config.max_target_len,
    )
    test_pairs = result.test_pairs
    data = f"the run's test split ({RunLayout(run_dir).test_split})"
    metrics = (
        {"test": evaluate(translator, test_pairs, beam_size=beam_size, data=data)}
        if test_pairs
        else {}
    )
    metrics["history"] = result.history
    write_metrics(run_dir, metrics)
    if figures:
        samples = [source for source, _ in test_pairs[:num_heatmaps]]
        _draw_figures(run_dir, result.history, translator, samples)
    if verbose and "test" in metrics:
        print_metrics(metrics["test"])
    return metrics


def _draw_figures(run_dir, history, translator, samples):
    """`report`'s figures in ``RUN_DIR/plots``: the positional encoding, the
    history, and an attention heatmap of each sample's translation."""
    plots = run_dir / PLOTS_DIR
    plotting.plot_positional_encoding(plots / POSITIONAL_ENCODING_PLOT_FILE)
    # The whole run's history.csv (a resumed or continued run's rows before this
    # call too), keyed by step; Keras' history of this call without it.
    whole = history_columns(read_history(RunLayout(run_dir).history))
    plotting.plot_history(whole or history, plots / HISTORY_PLOT_FILE)
    for i, translation in enumerate(
        translator.translate(samples, return_attention=True)
    ):
        if translation.source_tokens:
            plotting.plot_attention(
                translation.attention,
                _labels(translation.source_tokens),
                _labels(translation.target_tokens),
                plots / ATTENTION_PLOT_FILE.format(i),
                title=translation.source,
            )


def _labels(tokens):
    """Tokens as heatmap labels: the joiner mark (no glyph in matplotlib's default
    font, DejaVu Sans) drawn as "·"."""
    return [token.replace(JOINER, "·") for token in tokens]


def print_metrics(metrics, examples=5):
    """Prints `evaluate`'s metrics (`inference.format_metrics`)."""
    print(format_metrics(metrics, examples))


def print_worker_summary(result):
    """Prints what a non-chief worker of a multi-worker `train` did: the pairs it
    read and skipped, and its history (the chief writes the run: `report`)."""
    summary, worker = result.summary, result.worker_index
    print(
        f"worker {worker} read {summary['pairs_read']} pairs "
        f"({summary['malformed_lines_skipped']} malformed lines skipped, "
        f"{summary['dropped_for_length']} too long)"
    )
    print(f"worker {worker} done; history: {json.dumps(result.history)}")


def evaluate_run(run_dir, data=None, settings=None, translator=None):
    """Scores a trained run: `inference.evaluate` of its translations of ``data``,
    read a batch at a time (`text.corpus.iter_pairs`: memory bounded by a batch).

    Args:
        run_dir: the run directory.
        data: a TSV file of pairs, all of it scored; default: the run's test split,
            ``RUN_DIR/splits/test.tsv``.
        settings: the searches' `inference.SearchSettings` (default: greedy).
        translator: the run's `Translator` when already loaded (default:
            ``inference.load_translator(run_dir, settings)``); it searches with its
            own settings.

    Returns:
        `inference.evaluate`'s metrics dict; its ``data`` names the file read.
    """
    if translator is None:
        translator = load_translator(run_dir, settings)
    if data:
        label = data
    else:
        data = RunLayout(run_dir).test_split
        label = f"the run's test split ({data})"
    pairs = _stoppable(iter_pairs(data))
    return evaluate(translator, pairs, data=label)


def _stoppable(pairs):
    """``pairs``, a stopping signal whose first raise was lost (in a garbage
    collector's callback) raised again before each (`stopping.raise_if_swallowed`)."""
    for pair in pairs:
        raise_if_swallowed()
        yield pair


def translate_stream(translator, batches, sink, scores=False, on_truncated=None):
    """Translates each batch of lines as it comes and writes its answers at once.

    A filter's loop: memory is bounded by a batch, and every batch is written
    (whole, in input order, flushed) before the next one is read, so a line on an
    open pipe is answered without waiting for the end of the input.

    Args:
        translator: a run's `inference.Translator`
            (`inference.load_translator`), searching with its settings.
        batches: lists of source lines (`cli.line_batches.LineBatches`, or any
            iterable of lists of str).
        sink: what writes a batch of answers (`cli.line_batches.CompleteLines`:
            ``write(lines)``); its ``written`` says how many are out when the loop
            is stopped.
        scores: each translation's score after a tab.
        on_truncated: called with each `Translation` whose source was cut at the
            model's maximum length.

    Returns:
        how many lines were translated.
    """
    count = 0
    for batch in batches:
        translations = translator.translate(batch)
        if on_truncated is not None:
            for translation in translations:
                if translation.truncated:
                    on_truncated(translation)
        sink.write([_answer(t, scores) for t in translations])
        count += len(translations)
    return count


def _answer(translation, scores):
    """A translation's output line: its text, and its score after a tab."""
    if scores:
        return f"{translation.text}\t{translation.score:.4f}"
    return translation.text


def serving_lines(run_dir, export_dir, model_name, xla=False):
    """The ``docker run`` and ``curl`` lines serving an export of ``run_dir``,
    the request holding one of the run's own sources (`serving.serving_instructions`).
    """
    sample = serving.sample_sources(run_dir, 1)[0]
    return serving.serving_instructions(
        export_dir, model_name, sample_text=sample, xla=xla
    )


def run_demo(
    out_dir="runs/demo",
    epochs=None,
    verbose=1,
    overwrite=False,
    figures=True,
    check_details=True,
):
    """The main job: trains on the bundled dates corpus, evaluates, writes figures,
    exports a TF Serving SavedModel, checks it and prints the docker run / curl lines.

    Args:
        out_dir: the run directory.
        epochs: overrides the demo's number of epochs.
        verbose: what training prints (`training.train`'s ``verbose``).
        overwrite: replace a finished run in ``out_dir``.
        figures: draw the run's figures (`report`'s ``figures``).
        check_details: print check-serving's op list and each request
            (``ServingCheck.summary``); False, its one-line verdict
            (``summary_line``: the command line without ``--verbose``).

    Returns:
        (TrainResult, metrics dict).
    """
    train_config = DEMO_TRAIN_CONFIG
    if epochs is not None:
        train_config = TrainConfig(**{**vars(train_config), "epochs": epochs})
    metrics = {}
    result = training.train(
        None,
        out_dir,
        DEMO_MODEL_CONFIG,
        train_config,
        overwrite=overwrite,
        verbose=verbose,
        on_finished=lambda done: metrics.update(report(done, figures=figures)),
    )
    export_base = pathlib.Path(result.run_dir) / EXPORT_DIR / serving.DEFAULT_MODEL_NAME
    version_dir = serving.export_run(result.run_dir, export_base)
    check = serving.check_serving(version_dir)
    print(check.summary() if check_details else check.summary_line())
    if not check.ok:
        raise RuntimeError(
            f"The exported SavedModel {version_dir} fails check-serving (see above)"
        )
    sample = result.test_pairs[0][0] if result.test_pairs else "14 juillet 1989"
    print(serving.serving_instructions(export_base, sample_text=sample))
    return result, metrics
