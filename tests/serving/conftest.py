"""Shared fixtures: copies of the committed tiny runs (tests/serving/data, built by
`python -m tests.serving.make_tiny_runs`: tensorflow-text, core-only and
SentencePiece tokenizers), each exported once, for every test module of
tests/serving (session scope), a bfloat16 run's exports, and what one fresh
process serves from them."""

import collections
import contextlib
import io
import pathlib

import pytest

from keras_selfattn import cli, serving, text
from keras_selfattn.serving import signatures
from keras_selfattn.text.shortlist import DEFAULT_FREQUENT
from tests.serving.tiny_runs import committed_run, mixed_bfloat16_copy


@pytest.fixture(scope="session")
def text_run_dir(tmp_path_factory):
    """A run whose tokenizers use tensorflow-text ops (case folding, whitespace
    tokenizer): a copy of the committed one (`tiny_runs.COMMITTED_RUNS`)."""
    return committed_run("text_run", tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def core_run_dir(tmp_path_factory):
    """A run whose tokenizers use core TensorFlow ops only
    (TokenizerConfig(ops="core")); its model also has a deep output (`DeepOutput`,
    so the served graphs, the op audit and the fresh-process loads cover it)."""
    return committed_run("core_run", tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def sentencepiece_run_dir(tmp_path_factory):
    """A run whose two sides are SentencePiece models learned from its training
    pairs."""
    return committed_run("sentencepiece_run", tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="session")
def text_export_traces(text_run_dir, tmp_path_factory):
    """``(BASE/1 of the tensorflow-text run, {signature: times traced})``: the
    export counts each trace of the serving functions (a Python call of one runs
    only when it is traced, never when its graph runs)."""
    traces = collections.Counter()
    serving_functions = signatures.serving_functions

    def counted(name, function):
        def traced(*tensors):
            traces[name] += 1
            return function(*tensors)

        return traced

    def counting_serving_functions(*args, **kwargs):
        return {
            name: (counted(name, function), spec)
            for name, (function, spec) in serving_functions(*args, **kwargs).items()
        }

    base = tmp_path_factory.mktemp("exports") / "translator"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(signatures, "serving_functions", counting_serving_functions)
        version_dir = serving.export_run(text_run_dir, base)
    return version_dir, dict(traces)


@pytest.fixture(scope="session")
def text_export(text_export_traces):
    """BASE/1 of the tensorflow-text run."""
    return text_export_traces[0]


XLA_CLI_VERSION = 5  # an explicit version, not the first one the base would get


@pytest.fixture(scope="session")
def xla_cli_export(text_run_dir, tmp_path_factory):
    """``keras-selfattn export --version 5 --xla`` of the tensorflow-text run:
    ``(its exit status, BASE/5, what it printed)``. One XLA export (the costliest
    to make) serves the tests of the XLA export and of the command line."""
    base = tmp_path_factory.mktemp("xla_exports") / "translator"
    command = ["export", "--model", str(text_run_dir), "--export-dir", str(base)]
    command += ["--version", str(XLA_CLI_VERSION), "--xla"]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = cli.main(command)
    return status, base / str(XLA_CLI_VERSION), printed.getvalue()


@pytest.fixture(scope="session")
def xla_export(xla_cli_export):
    """BASE/5 of the tensorflow-text run, exported with ``--xla``."""
    status, version_dir, printed = xla_cli_export
    assert status == 0, printed
    return version_dir


@pytest.fixture(scope="session")
def one_group_export(text_run_dir, tmp_path_factory):
    """BASE/1 of the tensorflow-text run, exported with ``groups=1``."""
    base = tmp_path_factory.mktemp("one_group_exports") / "translator"
    return serving.export_run(text_run_dir, base, groups=1)


@pytest.fixture(scope="session")
def core_export(core_run_dir, tmp_path_factory):
    """BASE/1 of the core-ops run."""
    base = tmp_path_factory.mktemp("core_exports") / "translator"
    return serving.export_run(core_run_dir, base)


@pytest.fixture(scope="session")
def sample_texts(text_run_dir):
    """Held-out sources of the run, plus sentences that exercise the edges of the
    tokenizer."""
    held_out = [
        source
        for source, _ in text.read_pairs(
            pathlib.Path(text_run_dir) / "splits" / "test.tsv"
        )[:16]
    ]
    return held_out + [
        "",  # no tokens: "" with score 0
        "   ",  # blank
        "qwxz vbnmk",  # only unknown words
        # Longer than max_source_len:
        "Mercredi 14 JUILLET 1989 à midi, le quatorzième jour du mois",
        # NFKC / case folding differ from core lowercasing:
        "ｆｕｌｌ-width ２０２０",
    ]


@pytest.fixture(scope="session")
def bfloat16_run_exports(text_run_dir, tmp_path_factory):
    """A mixed_bfloat16 run (the tensorflow-text run's `mixed_bfloat16_copy`) and
    two exports of it: ``(run, as trained, with dtype="float32")``."""
    directory = tmp_path_factory.mktemp("bfloat16_run")
    run_dir = mixed_bfloat16_copy(text_run_dir, directory / "run")
    trained = serving.export_run(run_dir, directory / "as_trained")
    float32 = serving.export_run(run_dir, directory / "float32", dtype="float32")
    return run_dir, trained, float32


@pytest.fixture(scope="session")
def sentencepiece_export(sentencepiece_run_dir, tmp_path_factory):
    """``(run, BASE/1, texts)``: the SentencePiece run's export and the texts its
    tests translate (held-out sources and the tokenizer's edge cases)."""
    held_out = text.read_pairs(
        pathlib.Path(sentencepiece_run_dir) / "splits" / "test.tsv"
    )
    texts = [source for source, _ in held_out[:16]] + [
        "",
        "   ",
        "qwxz vbnmk Ω",  # unknown pieces
        "Mercredi 14 JUILLET 1989 à midi, le quatorzième jour du mois",  # too long
        "ｆｕｌｌ-width ２０２０",  # NFKC and case folding before SentencePiece
    ]
    base = tmp_path_factory.mktemp("sentencepiece_exports") / "translator"
    return sentencepiece_run_dir, serving.export_run(sentencepiece_run_dir, base), texts


@pytest.fixture(scope="session")
def option_exports(text_run_dir, sample_texts, tmp_path_factory):
    """``(run, texts covered, N, the left-out id, {label: BASE/1})``: a copy of the
    tensorflow-text run whose shortlist of N pieces holds every greedy argmax of
    the texts covered but one piece (`test_served_precision.covering_run`), and
    its exports with each of `test_served_precision.option_sets`, by
    `option_label`."""
    from tests.serving.test_served_precision import (
        covering_run,
        option_label,
        option_sets,
    )

    directory = tmp_path_factory.mktemp("option_exports")
    run, covered, size, left_out = covering_run(text_run_dir, sample_texts, directory)
    exports = {
        option_label(options): serving.export_run(
            run, directory / option_label(options), **options
        )
        for options in option_sets(size)
    }
    return run, covered, size, left_out, exports


@pytest.fixture(scope="session")
def fresh_process_reports(
    core_export, text_export, sentencepiece_export, sample_texts, tmp_path_factory
):
    """What a fresh process that imports nothing of this package serves, by name:
    "core" (`core_export`, loaded before tensorflow_text is imported) and
    "default" (`text_export`) for `sample_texts`, "sentencepiece" for the
    SentencePiece export's own texts, each under both loaders and both text
    signatures, in turn in one TensorFlow start-up, each into a graph of its own.

    Only these three need a fresh process: each is a kind of graph (core ops
    only; tensorflow-text ops; SentencePiece ops and model) whose loading without
    this package is in question. The other exports (XLA, one length group, a
    bfloat16 run's float32 export, the shortlist, bfloat16 and int8 options) are
    graphs of the same kinds with other options: their tests serve them in the
    test process with the same loader code (`serve_in_this_process`), and a
    fresh process loads the XLA and the bfloat16-int8-shortlist exports alone in
    `malformed_reports`."""
    from tests.serving.test_export import Served, load_each_in_fresh_process

    _, version_dir, texts = sentencepiece_export
    exports = {
        "core": Served(core_export, tensorflow_text=False),
        "default": text_export,
        "sentencepiece": Served(version_dir, texts),
    }
    reports = load_each_in_fresh_process(
        list(exports.values()),
        sample_texts,
        tmp_path_factory.mktemp("fresh_process_reports"),
    )
    return dict(zip(exports, reports, strict=True))


@pytest.fixture(scope="session")
def text_export_served(fresh_process_reports):
    """What a fresh process serves from `text_export` for `sample_texts`, under both
    loaders: the reference that the tests comparing another export, or
    `translate`, with the default export read."""
    return fresh_process_reports["default"]


@pytest.fixture(scope="session")
def learned_shortlist_export(text_run_dir, tmp_path_factory):
    """BASE/1 of the tensorflow-text run in bfloat16 with int8 weights and the
    vocabulary shortlist its training wrote into the run directory (learned
    from its training split)."""
    base = tmp_path_factory.mktemp("learned_shortlist_exports") / "translator"
    return serving.export_run(
        text_run_dir,
        base,
        precision="bfloat16",
        quantize="int8",
        shortlist=DEFAULT_FREQUENT,
    )


@pytest.fixture(scope="session")
def malformed_reports(text_export, xla_export, learned_shortlist_export):
    """``{(SavedModel directory, loader): {case: its line}}``: the malformed
    requests (`test_malformed_requests.malformed_outcomes`) of the default export
    under both loaders, and of the XLA and the `learned_shortlist_export` under
    the session loader, answered in turn by one fresh process."""
    from tests.serving.test_malformed_requests import malformed_outcomes

    runs = [
        (text_export, "session"),
        (text_export, "tf2"),
        (xla_export, "session"),
        (learned_shortlist_export, "session"),
    ]
    return dict(zip(runs, malformed_outcomes(runs), strict=True))
