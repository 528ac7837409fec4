"""Exports in bfloat16, with a vocabulary shortlist and with a length ratio: what
they serve under the session loader, their report, the op audit, malformed
requests, bad options."""

import json
import math
import shutil
import types

import numpy as np
import pytest

from keras_selfattn import cli, serving
from keras_selfattn.inference import load_translator
from keras_selfattn.reserved_ids import END_ID
from keras_selfattn.search_settings import SearchSettings
from keras_selfattn.serving import audit, export_report, signatures
from keras_selfattn.text.shortlist import DEFAULT_FREQUENT, ShortlistTable
from tests.serving.test_export import (
    Served,
    export_through_the_cli,
    serve_in_this_process,
)


def covering_run(run_dir, texts, tmp_path):
    """A copy of ``run_dir`` whose ``shortlist.npz`` keeps exactly the target
    pieces its float32 greedy search produces for ``texts`` but one (the least
    used), and the texts whose translations do not use that one.

    Returns ``(run copy, texts covered, N, the left-out id)``: on those texts the
    shortlist holds every greedy argmax, so the translations must be the same.
    """
    translator = load_translator(run_dir)
    produced = [
        [
            translator.tokenizer.target.vocabulary.tokens.index(t)
            for t in r.target_tokens
        ]
        for r in translator.translate(texts)
    ]
    counts = np.bincount(
        np.concatenate([np.asarray(p, int) for p in produced if p] or [[0]]),
        minlength=translator.model.target_vocab_size,
    )
    ordinary = np.arange(4, translator.model.target_vocab_size)
    left_out = int(ordinary[np.argmin(counts[ordinary])])
    covered = [t for t, p in zip(texts, produced, strict=True) if left_out not in p]
    kept = np.array(
        sorted({i for p in produced for i in p if i != left_out} | {END_ID}), np.int32
    )
    copy = tmp_path / "run_copy"
    shutil.copytree(run_dir, copy)
    source_size = translator.tokenizer.source_vocab_size
    record = {"per_source": 1, "frequent": int(kept.size), "learned_from": "a test"}
    candidates = np.full([source_size, 1], END_ID, np.int32)
    ShortlistTable(candidates, kept, record).save(copy)
    return copy, covered, int(kept.size), left_out


def option_sets(size):
    """The export options `option_exports` exports with (``size``: the covering
    shortlist's)."""
    return (
        {"shortlist": size, "xla": True},
        {"precision": "bfloat16", "max_length_ratio": 0.5},
        {"precision": "bfloat16", "quantize": "int8", "shortlist": size},
    )


def option_label(options):
    """The name of an `option_sets` export (its folder, its fresh-process report)."""
    return "_".join(f"{k}{v}" for k, v in options.items())


@pytest.mark.slow
def test_option_exports_serve_the_float32_texts_under_the_session_loader(
    text_export, text_export_served, sample_texts, option_exports
):
    """A shortlist that holds every greedy argmax gives float32's texts alone,
    also in an XLA export (its width padded to a bucket, the padding masked);
    bfloat16 exports (alone, and with int8 weights and the shortlist) serve what
    `Translator` translates with the same options. Each passes the audit and
    reports itself. (bfloat16 with the shortlist runs inside the int8 export,
    which adds only the dequantization before the loop; the shortlist without
    XLA runs inside it too.) They are served in this process
    (`serve_in_this_process`): graphs of the default export's kind with other
    options, each passing the op audit."""
    run, covered, size, left_out, exports = option_exports
    assert covered, "some texts must translate without the left-out piece"
    served = text_export_served["session"]["serving_default"]["translation"]
    expected = [t for t, s in zip(served, sample_texts, strict=True) if s in covered]
    for options in option_sets(size):
        exported = exports[option_label(options)]
        assert audit.audit_saved_model(exported).ok, options
        served = serve_in_this_process(
            Served(exported, covered, ("session",), ("serving_default",)), []
        )
        texts = served["session"]["serving_default"]["translation"]
        translator = load_translator(
            run,
            precision=options.get("precision", "float32"),
            quantize=options.get("quantize"),
            shortlist=options.get("shortlist"),
            max_length_ratio=options.get("max_length_ratio"),
        )
        if "xla" in options:
            assert audit.audit_saved_model(exported).needs_xla_flag
        assert texts == [t.text for t in translator.translate(covered)], options
        if "precision" not in options:
            assert texts == expected
        report = export_report.read_export_report(exported)
        lowered = "precision" in options
        assert set(report["precision"].values()) == {
            "bfloat16" if lowered else "float32"
        }
        assert report["cpu_features_assumed"] == (
            list(export_report.BF16_CPU_FLAGS) if lowered else []
        )
        if "shortlist" in options:
            assert report["shortlist"]["frequent"] == size
            assert report["shortlist"]["source"].endswith("shortlist.npz")
        if "quantize" in options:
            assert report["quantize"]["int8"] == list(export_report.INT8_PRODUCTS)
            assert report["quantize"]["weights"] == translator.int8_weights.paths
            # int8 kernels in place of the float32 ones: the variables shrink.
            assert _variables_bytes(exported) < 0.6 * _variables_bytes(text_export)
        else:
            assert report["quantize"] is None
        assert report["max_length_ratio"] == options.get("max_length_ratio")
    # The left-out piece is never produced with the shortlist, on any text.
    shortlisted = load_translator(run, shortlist=size).translate(sample_texts)
    vocabulary = load_translator(run).tokenizer.target.vocabulary.tokens
    assert all(vocabulary[left_out] not in t.target_tokens for t in shortlisted)


def _variables_bytes(version_dir):
    return sum(p.stat().st_size for p in (version_dir / "variables").iterdir())


@pytest.mark.slow
def test_bfloat16_shortlist_int8_export_answers_malformed_requests(
    learned_shortlist_export, malformed_reports
):
    """Malformed requests still answer InvalidArgument (the in-graph checks come
    before the shortlist, the int8 weights and the searches)."""
    exported = learned_shortlist_export
    outcomes = dict(malformed_reports[(exported, "session")])
    outcomes.pop("modules")
    for case, line in outcomes.items():
        if case in {"good_after_bad", "good_ids_after_bad"}:
            assert line["outcome"] == "ok", line
        else:
            assert line["outcome"] == "InvalidArgumentError", line
    # Training wrote the table into the run directory, recorded in the export.
    report = export_report.read_export_report(exported)
    assert report["shortlist"]["frequent"] == DEFAULT_FREQUENT
    assert report["shortlist"]["learned_from"] == "the training split of the run"
    assert report["shortlist"]["source"].endswith("shortlist.npz")


@pytest.mark.parametrize(
    "options, message",
    [
        ({"precision": "float16"}, "precision='float16'"),
        ({"precision": "int8"}, "precision='int8'"),
        ({"quantize": "int4"}, "quantize='int4'"),
        ({"quantize": "INT8"}, "quantize='INT8'"),
        ({"quantize": 8}, "quantize=8"),
        ({"precision": None}, "precision=None"),
        ({"shortlist": 0}, "shortlist=0"),
        ({"shortlist": "50"}, "shortlist='50'"),
        ({"shortlist": True}, "shortlist=True"),
        ({"max_length_ratio": 0}, "max_length_ratio=0"),
        ({"max_length_ratio": -1.5}, "max_length_ratio=-1.5"),
        ({"max_length_ratio": float("nan")}, "max_length_ratio=nan"),
        ({"max_length_ratio": float("inf")}, "max_length_ratio=inf"),
        ({"max_length_ratio": "2"}, "max_length_ratio='2'"),
        ({"max_length_ratio": True}, "max_length_ratio=True"),
    ],
)
def test_bad_options_are_refused_in_one_line(tmp_path, options, message):
    """Refused before the run is read (no run here) and before anything is written."""
    with pytest.raises(ValueError, match=message) as raised:
        serving.export_run(tmp_path / "no_run", tmp_path / "export", **options)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "export").exists()


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "2", True])
def test_a_translator_refuses_a_bad_length_ratio_naming_it(tmp_path, bad):
    """Before the run is read (there is none here)."""
    with pytest.raises(ValueError, match=f"max_length_ratio={bad!r}"):
        load_translator(tmp_path / "no_run", max_length_ratio=bad)


def test_settings_and_their_fields_together_are_refused_naming_the_call(tmp_path):
    """``settings`` or its fields as keywords, not both: refused before the run
    is read (there is none here) or an export folder is made."""
    for call, name in (
        (lambda **kw: load_translator(tmp_path / "no_run", **kw), "load_translator"),
        (
            lambda **kw: serving.export_run(tmp_path / "no_run", tmp_path / "x", **kw),
            "export_run",
        ),
    ):
        with pytest.raises(TypeError) as raised:
            call(settings=SearchSettings(), beam_size=4)
        assert str(raised.value) == (
            f"{name} takes settings or their fields as keywords, not both. "
            "Received: ['beam_size']"
        )
    assert not (tmp_path / "x").exists()


@pytest.mark.slow  # traces and runs several searches: 3-4 CPU-s
def test_the_served_searches_cap_each_sentence_as_the_translator_does(
    text_run_dir, sample_texts
):
    """Both text signatures search with the translator's ``max_length_ratio``,
    in length groups: with the end token made unlikely every sentence runs to
    its cap, min(max_target_len + 1, ceil(0.5 * source tokens) + 10) steps
    (some below the model's maximum, some at it), and the served texts are the
    translator's (greedy, and the best of translate_nbest's beam)."""
    import tensorflow as tf

    translator = load_translator(text_run_dir, max_length_ratio=0.5, beam_size=2)
    kernel, bias = translator.model.logits_dense.get_weights()
    bias[END_ID] -= 100.0  # never chosen: every search runs to its cap
    translator.model.logits_dense.set_weights([kernel, bias])
    texts = [t for t in sample_texts if t.strip()]
    greedy = translator.translate(texts, beam_size=1)
    max_len = translator.max_target_len + 1
    caps = [
        min(max_len, math.ceil(0.5 * len(t.source_tokens)) + 10)
        for t in greedy
        if t.source_tokens
    ]
    assert min(caps) < max_len and max(caps) == max_len, caps
    assert [len(t.target_tokens) for t in greedy if t.source_tokens] == caps
    served = signatures.serving_functions(translator, groups=2)
    request = tf.constant(texts)
    translations = served["serving_default"][0](request)["translation"].numpy()
    assert [t.decode() for t in translations] == [t.text for t in greedy]
    nbest = served["translate_nbest"][0](request)["translations"].numpy()
    best = translator.translate(texts, beam_size=2)
    assert [row[0].decode() for row in nbest] == [t.text for t in best]


def test_the_report_records_the_length_ratio():
    """None when off, the ratio otherwise, and a terminal line for each."""

    capped = export_report.export_report(_translator(max_length_ratio=1.5))
    off = export_report.export_report(_translator())
    assert capped["max_length_ratio"] == 1.5 and off["max_length_ratio"] is None
    assert export_report.format_report(capped)[-1] == (
        "max length ratio: 1.5 (each sentence at most ceil(1.5 x its source "
        "tokens) + 10 steps)"
    )
    assert export_report.format_report(off)[-1] == (
        "max length ratio: none (up to the model's maximum target length)"
    )


def test_cpu_warnings_name_the_missing_features(tmp_path):
    """A bfloat16 export warns on a host with neither flag, in one line; not on a
    host with one of them, nor for a float32 export."""
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx512f avx512_vnni\n")
    flags = export_report.host_cpu_flags(cpuinfo)
    assert {"avx512f", "avx512_vnni"} <= flags
    assert export_report.host_cpu_flags(tmp_path / "absent") == set()

    lowered = export_report.export_report(_translator(precision="bfloat16"))
    (warning,) = export_report.cpu_warnings(lowered, flags)
    assert "avx512_bf16" in warning and "amx_bf16" in warning and "\n" not in warning
    assert export_report.cpu_warnings(lowered, flags | {"amx_bf16"}) == []
    assert export_report.cpu_warnings(lowered, flags | {"avx512_bf16"}) == []
    float32 = export_report.export_report(_translator())
    assert export_report.cpu_warnings(float32, flags) == []
    assert export_report.cpu_warnings(None, flags) == []
    path = export_report.write_export_report(tmp_path / "1", lowered)
    assert path.parent.name == "assets.extra"
    assert export_report.read_export_report(tmp_path / "1") == lowered
    assert any("bfloat16" in line for line in export_report.format_report(lowered))


def _translator(**settings):
    """What `export_report` reads of a `Translator`: its settings, its
    shortlist's table and its int8 weights (none here)."""
    return types.SimpleNamespace(
        settings=SearchSettings(**settings), shortlist_table=None, int8_weights=None
    )


def test_cli_precisions_are_the_searches():
    from keras_selfattn.models.output_layer import SEARCH_PRECISIONS

    parser = cli.build_parser()
    for command in ("translate", "evaluate", "export"):
        argv = [command, "--model", "run", "--precision", "bfloat16"]
        if command == "export":
            argv += ["--export-dir", "b"]
        assert parser.parse_args(argv).precision in SEARCH_PRECISIONS
    assert SEARCH_PRECISIONS == ("float32", "bfloat16")


@pytest.mark.parametrize("command", ["translate", "evaluate", "export"])
@pytest.mark.parametrize(
    "flags, named",
    [
        (["--precision", "float16"], ["--precision", "float16"]),
        (["--quantize", "int4"], ["--quantize", "int4"]),
        (["--quantize", "float16"], ["--quantize", "float16"]),
        (["--shortlist", "0"], ["--shortlist", "'0'"]),
        (["--shortlist", "many"], ["--shortlist", "'many'"]),
        (["--max-length-ratio", "0"], ["--max-length-ratio", "'0'"]),
        (["--max-length-ratio", "inf"], ["--max-length-ratio", "'inf'"]),
    ],
)
def test_cli_bad_option_values_name_the_flag(command, flags, named, tmp_path, capsys):
    """A bad value is a one-line usage error (exit status 2) naming the flag and
    the value, before any run is read."""
    argv = [command, "--model", str(tmp_path / "no_run"), *flags]
    if command == "export":
        argv += ["--export-dir", str(tmp_path / "export")]
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert all(word in error for word in named), error


@pytest.mark.parametrize(
    "flags, expected",
    [
        (
            [],
            {
                "precision": "float32",
                "quantize": None,
                "shortlist": None,
                "max_length_ratio": None,
            },
        ),
        (["--max-length-ratio", "1.5"], {"max_length_ratio": 1.5}),
        (["--shortlist"], {"shortlist": DEFAULT_FREQUENT}),
        (["--shortlist", "7", "--precision", "bfloat16"], {"shortlist": 7}),
        (["--quantize", "int8", "--precision", "bfloat16"], {"quantize": "int8"}),
    ],
)
def test_cli_export_options_reach_export_run(flags, expected, tmp_path, monkeypatch):
    received = export_through_the_cli(flags, tmp_path, monkeypatch)
    assert {k: received[k] for k in expected} == expected
    assert received["precision"] == ("bfloat16" if "bfloat16" in flags else "float32")


@pytest.mark.parametrize("command", ["translate", "evaluate"])
@pytest.mark.parametrize(
    "flags, ratio", [([], None), (["--max-length-ratio", "1.5"], 1.5)]
)
def test_cli_translate_and_evaluate_pass_the_length_ratio_on(
    command, flags, ratio, tmp_path, monkeypatch
):
    """``--max-length-ratio R`` reaches `inference.load_translator` (replaced
    by a recorder) in the command's settings; without it, None."""
    from keras_selfattn import inference
    from keras_selfattn.cli import command as cli_command
    from keras_selfattn.cli import commands, errors

    received = {}

    def load_translator(run_dir, settings):
        received["settings"] = settings

    monkeypatch.setattr(errors, "check_run_directory", lambda path: None)
    monkeypatch.setattr(inference, "load_translator", load_translator)
    argv = [command, "--model", str(tmp_path), *flags]
    cli_command.load_translator(commands.prepare(argv))
    assert received["settings"].max_length_ratio == ratio


@pytest.mark.slow
def test_cli_translate_and_evaluate_take_the_options(text_run_dir, capsys):
    """``translate`` and ``evaluate`` with --precision bfloat16 --shortlist give
    what `load_translator` gives with the same options (the table training
    wrote into the run)."""
    texts = ["14 juillet 1989", "mardi 3 mars 2015"]
    flags = ["--precision", "bfloat16", "--shortlist", str(DEFAULT_FREQUENT)]
    assert cli.main(["translate", "--model", str(text_run_dir), *flags, *texts]) == 0
    printed = capsys.readouterr().out.splitlines()
    translator = load_translator(
        text_run_dir, precision="bfloat16", shortlist=DEFAULT_FREQUENT
    )
    assert printed == [t.text for t in translator.translate(texts)]
    assert cli.main(["evaluate", "--model", str(text_run_dir), *flags, "--json"]) == 0
    scores = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert 0 <= scores["chrf"] <= 100


@pytest.mark.slow  # traces and runs several searches: 3-4 CPU-s
def test_translating_with_attention_searches_with_the_options(
    text_run_dir, sample_texts, tmp_path
):
    """``return_attention`` keeps the precision and the shortlist: the tokens are
    those of the same translator without it, never the float32 full-vocabulary
    search's, each with its attention weights. A shortlist of the reserved
    pieces and the most frequent ordinary one makes the two searches differ."""
    float32 = load_translator(text_run_dir)
    full = float32.translate(sample_texts)
    vocabulary = float32.tokenizer.target.vocabulary.tokens
    produced = [vocabulary.index(t) for r in full for t in r.target_tokens]
    counts = np.bincount(produced, minlength=len(vocabulary))
    counts[: END_ID + 1] = 0
    kept = np.array(sorted({END_ID, int(counts.argmax())}), np.int32)
    run = tmp_path / "run_copy"
    shutil.copytree(text_run_dir, run)
    source_size = float32.tokenizer.source_vocab_size
    candidates = np.full([source_size, 1], END_ID, np.int32)
    record = {"per_source": 1, "frequent": 2, "learned_from": "a test"}
    ShortlistTable(candidates, kept, record).save(run)
    table = ShortlistTable.load(run)
    allowed = {vocabulary[i] for i in table.always}  # the reserved ones too
    assert len(allowed) < len(vocabulary) / 2
    assert any(set(r.target_tokens) - allowed for r in full)  # the full search's
    for options in (
        {"shortlist": 2},
        {"precision": "bfloat16", "shortlist": 2},
    ):
        translator = load_translator(run, **options)
        plain = translator.translate(sample_texts)
        attended = translator.translate(sample_texts, return_attention=True)
        assert [t.target_tokens for t in attended] == [t.target_tokens for t in plain]
        for translation in attended:
            assert set(translation.target_tokens) <= allowed, options
            if not translation.source_tokens:  # no tokens: no search
                assert translation.attention is None
                continue
            weights = np.asarray(translation.attention)
            assert weights.shape == (
                len(translation.target_tokens),
                len(translation.source_tokens),
            )
            assert np.all(weights >= 0) and np.all(weights <= 1 + 1e-6)
