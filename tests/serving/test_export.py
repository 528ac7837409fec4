"""`export_run` / `keras-selfattn export`: layout, signatures, fresh-process loading,
versions, atomicity."""

import collections
import dataclasses
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2

from keras_selfattn import cli, serving, text
from keras_selfattn.cli import errors
from keras_selfattn.inference import load_translator
from keras_selfattn.serving import (
    audit,
    op_tables,
    publishing,
    saved_model_graph,
    signatures,
    warmup,
)
from keras_selfattn.serving.export import XLA_WARMUP_BATCH_SIZES
from tests.serving.tiny_runs import BEAM_SIZE

# One xdist worker runs every serving test, so the session fixtures train once.

HERE = pathlib.Path(__file__).parent


def signature_defs(saved_model_dir):
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(
        (pathlib.Path(saved_model_dir) / "saved_model.pb").read_bytes()
    )
    return saved_model.meta_graphs[0].signature_def


def io_spec(signature):
    """{name: (dtype enum, shape)} of a SignatureDef's inputs and outputs."""

    def spec(infos):
        return {
            k: (v.dtype, [d.size for d in v.tensor_shape.dim]) for k, v in infos.items()
        }

    return spec(signature.inputs), spec(signature.outputs)


@pytest.mark.slow  # reads an export
def test_layout_in_tf_serving_form(text_export, text_run_dir):
    base = text_export.parent
    assert text_export.name == "1"
    assert (text_export / "saved_model.pb").is_file()
    assert (text_export / "variables" / "variables.index").is_file()
    for name in ("source_vocab.txt", "target_vocab.txt"):
        assert (text_export / "assets" / name).read_text("utf-8") == (
            pathlib.Path(text_run_dir) / name
        ).read_text("utf-8")
    # Nothing else in BASE: the temporary folder is gone, no version-like leftovers.
    assert sorted(p.name for p in base.iterdir()) == ["1"]

    logs = serving.read_warmup_requests(text_export)
    assert 1 <= len(logs) <= warmup.MAX_WARMUP_RECORDS
    signatures = [log.predict_log.request.model_spec.signature_name for log in logs]
    assert set(signatures) == {"serving_default", "translate_nbest", "serve"}
    assert all(log.predict_log.request.model_spec.name == "translator" for log in logs)


@pytest.mark.slow  # reads an export
def test_signatures(text_export):
    DT_STRING, DT_FLOAT, DT_INT32 = 7, 1, 3
    defs = signature_defs(text_export)
    assert io_spec(defs["serving_default"]) == (
        {"text": (DT_STRING, [-1])},
        {"translation": (DT_STRING, [-1]), "score": (DT_FLOAT, [-1])},
    )
    assert io_spec(defs["translate_nbest"]) == (
        {"text": (DT_STRING, [-1])},
        {
            "translations": (DT_STRING, [-1, BEAM_SIZE]),
            "scores": (DT_FLOAT, [-1, BEAM_SIZE]),
        },
    )
    inputs, outputs = io_spec(defs["serve"])
    assert inputs == {"source": (DT_INT32, [-1, -1]), "target_in": (DT_INT32, [-1, -1])}
    assert list(outputs) == ["logits"] and outputs["logits"][0] == DT_FLOAT
    for name, signature in defs.items():
        if not name.startswith("__"):
            assert signature.method_name == "tensorflow/serving/predict"
            assert not [o for o in signature.outputs if o.endswith("_bytes")]
    saved_model = saved_model_graph.read_saved_model(text_export)
    assert not set(saved_model_graph.list_op_types(saved_model)) & (
        op_tables.PYTHON_BOUND_OPS
    )


def run_fresh_process(command):
    """``subprocess.run`` of a TensorFlow ``command`` (text captured), quiet and
    on the CPU; it inherits the test process's fast XLA compiling
    (tests/conftest.py), so the XLA exports' searches compile in about half the
    time."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    return subprocess.run(
        command, capture_output=True, text=True, timeout=600, env=env, check=False
    )


@dataclasses.dataclass(frozen=True)
class Served:
    """What `load_each_in_fresh_process` serves from one SavedModel ``directory``:
    ``texts`` (None: the texts shared by the others) under ``loaders``, by
    ``signatures`` (a report holds only these); ``tensorflow_text`` False: loaded
    before tensorflow_text is imported (such items come first)."""

    directory: pathlib.Path
    texts: list | None = None
    loaders: tuple = ("tf2", "session")
    signatures: tuple = ("serving_default", "translate_nbest")
    tensorflow_text: bool = True


def load_each_in_fresh_process(saved_model_dirs, texts, tmp_path):
    """What each directory serves, in one fresh process that imports nothing of
    this package (the session loader gives each a graph of its own): the list of
    their reports (`fresh_process_load`). A `Served` item is loaded with its own
    texts, loaders and signatures."""
    texts_path = tmp_path / "texts.json"
    texts_path.write_text(json.dumps(texts), encoding="utf-8")
    each = []
    for index, item in enumerate(saved_model_dirs):
        if isinstance(item, Served):
            own_texts = None
            if item.texts is not None:
                own_texts = tmp_path / f"texts_{index}.json"
                own_texts.write_text(json.dumps(item.texts), encoding="utf-8")
            each.append(
                [
                    str(item.directory),
                    own_texts and str(own_texts),
                    list(item.loaders),
                    list(item.signatures),
                    item.tensorflow_text,
                ]
            )
        else:
            each.append(str(item))
    command = [sys.executable, "-I", str(HERE / "fresh_process_load.py"), "--each"]
    command += [json.dumps(each), str(texts_path)]
    done = run_fresh_process(command)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def serve_in_this_process(served, texts):
    """What the `Served` export serves for ``texts`` (its own where it has them),
    loaded by `load_each_in_fresh_process`'s code in this process: for an export
    whose self-containment another test shows (a fresh process loads one of the
    same kind, or its op audit), only what it translates is in question."""
    from tests.serving import fresh_process_load

    own = served.texts if served.texts is not None else texts
    return fresh_process_load.report(
        str(served.directory),
        [t.encode("utf-8") for t in own],
        served.loaders,
        served.signatures,
    )


def assert_same_texts(first, second):
    """Two `fresh_process_load` reports give the same texts, under both loaders,
    greedy and n-best."""
    for loader in ("tf2", "session"):
        for name, output in (
            ("serving_default", "translation"),
            ("translate_nbest", "translations"),
        ):
            assert first[loader][name][output] == second[loader][name][output]


@pytest.mark.slow
def test_fresh_process_both_loaders_equal_translate(
    text_export_served, text_run_dir, sample_texts
):
    report = text_export_served
    assert not [m for m in report["modules"] if m.startswith("keras_selfattn")]

    translator = load_translator(text_run_dir)
    greedy = translator.translate(sample_texts)
    beam = translator.translate(sample_texts, beam_size=BEAM_SIZE)
    expected = [t.text for t in greedy]
    assert len(set(expected)) > 3, (
        "the fixture model should translate sentences differently"
    )
    for loader in ("tf2", "session"):
        outputs = report[loader]["serving_default"]
        assert outputs["translation"] == expected, loader
        np.testing.assert_allclose(
            outputs["score"], [t.score for t in greedy], atol=1e-4
        )
        nbest = report[loader]["translate_nbest"]
        assert [row[0] for row in nbest["translations"]] == [t.text for t in beam], (
            loader
        )
        np.testing.assert_allclose(
            [row[0] for row in nbest["scores"]], [t.score for t in beam], atol=1e-4
        )
        scores = np.array(nbest["scores"])
        assert np.all(np.diff(scores, axis=1) <= 1e-6), "n-best is sorted best first"
    empty = sample_texts.index("")
    assert report["session"]["serving_default"]["translation"][empty] == ""
    assert report["session"]["serving_default"]["score"][empty] == 0.0


@pytest.mark.slow
def test_xla_export_is_opt_in_audited_and_translates_alike(
    text_export, xla_export, text_export_served, sample_texts
):
    """``xla=True``: the searches compile with XLA; the audit names the server flag
    and the functions, both pass the op audit, and
    both loaders give the texts of the default export (in this process: a fresh
    one loads the XLA export alone in `malformed_reports`). The default needs no
    flag."""
    plain_audit = audit.audit_saved_model(text_export)
    xla_audit = audit.audit_saved_model(xla_export)
    assert not plain_audit.needs_xla_flag and not plain_audit.xla_functions
    assert "XLA" not in plain_audit.summary()
    assert xla_audit.ok and xla_audit.needs_xla_flag
    # greedy's and the beam's start (the encoder) and stage, in each length group
    assert len(xla_audit.xla_functions) == 4 * serving.DEFAULT_GROUPS
    assert sum("search_stage" in f for f in xla_audit.xla_functions) == 4
    assert audit.XLA_SERVER_FLAG in xla_audit.summary()
    # Both pass the audit. Both drop ended sentences: the default's loops in a cond
    # when enough have ended, the XLA stages' between stages, whose row counts take
    # bit operations (`decoding.tensorflow_loops._next_stage_rows`): the op sets
    # differ by those.
    assert plain_audit.ok
    assert set(plain_audit.op_types) ^ set(xla_audit.op_types) <= {
        "StatelessIf",
        "If",
        "Size",
        "Greater",
        "ZerosLike",
        "BitwiseOr",
        "RightShift",
    }
    served = serve_in_this_process(Served(xla_export), sample_texts)
    assert_same_texts(served, text_export_served)
    line = serving.serving_instructions(xla_export.parent, sample_text="a", xla=True)
    assert line.splitlines()[1].endswith(f"tensorflow/serving {audit.XLA_SERVER_FLAG}")


@pytest.mark.slow  # reads an export
def test_xla_export_warms_every_allowed_batch_size(text_export, xla_export):
    """XLA compiles a search per batch size and source bucket: the XLA export's
    warmup runs each text signature at every size TF Serving's batching
    configuration (export/batching_parameters.txt) lets it form, so that TF
    Serving compiles them at load. The default export's warmup is the first
    text alone and all of them."""
    config = (HERE.parents[1] / "export" / "batching_parameters.txt").read_text()
    allowed = tuple(
        int(n) for n in re.findall(r"^allowed_batch_sizes: (\d+)", config, re.MULTILINE)
    )
    assert allowed == XLA_WARMUP_BATCH_SIZES

    def text_batches(saved_model_dir):
        sizes = collections.defaultdict(list)
        for log in serving.read_warmup_requests(saved_model_dir):
            request = log.predict_log.request
            if "text" in request.inputs:
                texts = tf.make_ndarray(request.inputs["text"])
                sizes[request.model_spec.signature_name].append(len(texts))
        return dict(sizes)

    expected = list(allowed)
    assert text_batches(xla_export) == {
        "serving_default": expected,
        "translate_nbest": expected,
    }
    plain = text_batches(text_export)
    assert plain["serving_default"][0] == 1 and len(plain["serving_default"]) <= 2


def test_warmup_batches_of_sizes_cycle_the_texts_then_their_pairs():
    texts = [b"a", b"b c", b"d"]
    assert warmup.batches_of_sizes(texts, [1, 5]) == [
        [b"a"],
        [b"a", b"b c", b"d", b"a b c", b"a"],
    ]
    for bad in ([], [0], [2, -1], [1.5], [True]):
        with pytest.raises(ValueError, match=r"batch_sizes.*Received: batch_sizes="):
            warmup.batches_of_sizes(texts, bad)


@pytest.mark.slow
def test_core_export_loads_without_tensorflow_text(
    core_run_dir, fresh_process_reports, sample_texts
):
    """A fresh process that has imported neither this package nor tensorflow_text
    (the first export `fresh_process_reports` loads) serves the core-ops export's
    `translate` texts under both loaders."""
    # This run's model has a deep output: its served graphs carry it too.
    settings = json.loads((pathlib.Path(core_run_dir) / "config.json").read_text())
    assert settings["model"]["deep_output_hiddens"] > 0
    report = fresh_process_reports["core"]
    assert not [
        m
        for m in report["modules"]
        if m.startswith(("keras_selfattn", "tensorflow_text"))
    ]
    expected = [t.text for t in load_translator(core_run_dir).translate(sample_texts)]
    assert report["session"]["serving_default"]["translation"] == expected
    assert report["tf2"]["serving_default"]["translation"] == expected


def bfloat16_nodes(saved_model_dir):
    """How many nodes of the SavedModel's graph and functions take bfloat16."""
    from tensorflow.core.framework import types_pb2

    graph = saved_model_graph.read_saved_model(saved_model_dir).meta_graphs[0].graph_def
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    bf16 = types_pb2.DT_BFLOAT16
    return sum(
        any(v.type == bf16 or bf16 in v.list.type for v in node.attr.values())
        for node in nodes
    )


@pytest.mark.slow
def test_float32_export_of_a_bfloat16_run(bfloat16_run_exports, sample_texts, tmp_path):
    """``export_run(dtype="float32")`` of a mixed_bfloat16 run: a graph without
    bfloat16 that passes the audit and serves what `load_translator(run,
    dtype="float32")` translates (in this process: its graph is the default
    export's in float32, whose self-containment a fresh process shows); the
    default export keeps the run's bfloat16."""
    run_dir, trained, float32 = bfloat16_run_exports
    assert bfloat16_nodes(trained) > 0
    assert bfloat16_nodes(float32) == 0
    assert audit.audit_saved_model(float32).ok
    session_greedy = {"loaders": ("session",), "signatures": ("serving_default",)}
    report = serve_in_this_process(Served(float32, **session_greedy), sample_texts)
    expected = load_translator(run_dir, dtype="float32").translate(sample_texts)
    assert report["session"]["serving_default"]["translation"] == [
        t.text for t in expected
    ]
    with pytest.raises(ValueError, match="dtype=.*float33"):
        serving.export_run(run_dir, tmp_path / "bad", dtype="float33")
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow
def test_sentencepiece_export_serves_translate_text(
    sentencepiece_export, fresh_process_reports
):
    """SentencePiece in and out of the graph: served text equals `translate` text."""
    run_dir, version_dir, sample_texts = sentencepiece_export
    op_audit = audit.audit_saved_model(version_dir)
    assert op_audit.ok
    assert {"SentencepieceOp", "SentencepieceTokenizeOp"} <= set(
        op_audit.tensorflow_text
    )
    assert "SentencepieceDetokenizeOp" in op_audit.tensorflow_text
    report = fresh_process_reports["sentencepiece"]
    assert not [m for m in report["modules"] if m.startswith("keras_selfattn")]
    translator = load_translator(run_dir)
    assert translator.tokenizer.target.config.kind == "sentencepiece"
    greedy = translator.translate(sample_texts)
    beam = translator.translate(sample_texts, beam_size=BEAM_SIZE)
    expected = [t.text for t in greedy]
    assert len(set(expected)) > 3, "the fixture model should tell sentences apart"
    for loader in ("tf2", "session"):
        assert report[loader]["serving_default"]["translation"] == expected, loader
        np.testing.assert_allclose(
            report[loader]["serving_default"]["score"],
            [t.score for t in greedy],
            atol=1e-4,
        )
        nbest = report[loader]["translate_nbest"]["translations"]
        assert [row[0] for row in nbest] == [t.text for t in beam], loader


def test_next_version_ignores_what_tf_serving_ignores(tmp_path):
    assert publishing.next_version(tmp_path / "missing") == 1
    for name in ("1", "3", "10", ".export-tmp-abc", "7-old", "notes"):
        (tmp_path / name).mkdir()
    (tmp_path / "12").write_text("a file, not a version")
    assert publishing.list_versions(tmp_path) == [1, 3, 10]
    assert publishing.next_version(tmp_path) == 11


@pytest.mark.slow
def test_cli_export_explicit_version_then_next(xla_cli_export, text_run_dir, capsys):
    """``export --version 5`` (the XLA export of the fixtures, made through the
    command line) writes BASE/5 and prints the serving lines; the next automatic
    version is 6; exporting version 5 again is a one-line user error."""
    status, version_dir, printed = xla_cli_export
    base = version_dir.parent
    assert status == 0, printed
    assert version_dir.name == "5"
    assert f"exported: {base / '5'}" in printed
    # The example request uses a source of the run's own test split.
    sample = text.read_pairs(pathlib.Path(text_run_dir) / "splits" / "test.tsv")[0][0]
    body = json.dumps({"instances": [sample]}, ensure_ascii=False)
    assert f"-d {shlex.quote(body)}" in printed
    assert (
        "docker run -p 8500:8500 -p 8501:8501 --mount "
        f"type=bind,source={base.resolve()},target=/models/translator "
        "-e MODEL_NAME=translator -t tensorflow/serving"
    ) in printed
    assert (
        "curl -s -X POST http://localhost:8501/v1/models/translator:predict" in printed
    )
    assert publishing.list_versions(base) == [5]
    assert publishing.next_version(base) == 6

    # An existing version is never overwritten: a one-line user error, exit status 2.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(
            [
                "export",
                "--model",
                str(text_run_dir),
                "--export-dir",
                str(base),
                "--version",
                "5",
            ]
        )
    assert exit_info.value.code == 2
    assert "exists" in capsys.readouterr().err
    assert publishing.list_versions(base) == [5]


@pytest.mark.slow
def test_failed_export_leaves_no_version(text_run_dir, tmp_path, monkeypatch):
    base = tmp_path / "translator"
    (base / "1").mkdir(parents=True)  # an existing version stays untouched
    (base / "1" / "saved_model.pb").write_bytes(b"old")

    def fail_midway(saved_model_dir, logs):
        # The SavedModel is written by now; fail while writing the warmup file.
        path = pathlib.Path(saved_model_dir) / warmup.WARMUP_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"half a record")
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(warmup, "write_warmup_requests", fail_midway)
    with pytest.raises(OSError, match="simulated"):
        serving.export_run(text_run_dir, base)
    assert sorted(p.name for p in base.iterdir()) == ["1"], (
        "no BASE/2, no temporary folder left"
    )
    assert (base / "1" / "saved_model.pb").read_bytes() == b"old"


@pytest.mark.slow
def test_write_out_traces_each_signature_once(text_export_traces):
    """`build_export_archive`'s ``write_out`` lists the variables and saves from one
    trace of each signature (Keras alone traces twice: before the save, and again
    in its save context). The export counted is `text_export`, which
    `test_fresh_process_both_loaders_equal_translate` serves: it still
    translates."""
    _, traces = text_export_traces
    assert traces == {
        signatures.SERVING_SIGNATURE: 1,
        signatures.NBEST_SIGNATURE: 1,
        signatures.TOKEN_IDS_SIGNATURE: 1,
    }


def test_publish_is_a_rename_that_never_overwrites(tmp_path):
    base = tmp_path / "base"
    (base / "1").mkdir(parents=True)
    (base / "1" / "keep").write_text("v1")
    staged = base / (publishing.TEMP_PREFIX + "x") / "saved_model"
    staged.mkdir(parents=True)
    (staged / "saved_model.pb").write_text("v2")
    with pytest.raises(FileExistsError):
        publishing.publish(staged, base, 1, automatic=False)
    # With an automatic version, a taken number moves on to the next free one.
    assert publishing.publish(staged, base, 1, automatic=True) == base / "2"
    assert (base / "2" / "saved_model.pb").read_text() == "v2"
    assert (base / "1" / "keep").read_text() == "v1"


def export_through_the_cli(flags, tmp_path, monkeypatch):
    """The options ``keras-selfattn export ... FLAGS`` passes to `export_run`
    (replaced by a recorder)."""
    received = {}

    def export_run(run_dir, export_base, version, settings, **options):
        received.update(options)
        received.update(settings.as_dict())
        return pathlib.Path(export_base) / "1"

    monkeypatch.setattr(errors, "check_run_directory", lambda path: None)
    monkeypatch.setattr(serving, "export_run", export_run)
    monkeypatch.setattr(serving, "sample_sources", lambda run_dir, count: ["Va !"])
    (tmp_path / "run").mkdir()
    command = ["export", "--model", str(tmp_path / "run")]
    assert cli.main([*command, "--export-dir", str(tmp_path / "b"), *flags]) == 0
    return received


@pytest.mark.parametrize("flags", [[], ["--xla"]], ids=["default", "xla"])
def test_cli_export_xla_flag_reaches_export_run_and_the_docker_line(
    flags, tmp_path, monkeypatch, capsys
):
    """``export --xla`` passes ``xla=True`` to `export_run` and the printed docker
    line carries the server flag; without it, ``xla=False`` and no flag."""
    received = export_through_the_cli(flags, tmp_path, monkeypatch)
    assert received["xla"] is bool(flags)
    assert received["dtype"] is None
    docker = [
        line for line in capsys.readouterr().out.splitlines() if "docker run" in line
    ]
    assert len(docker) == 1
    assert docker[0].endswith(
        f"tensorflow/serving {audit.XLA_SERVER_FLAG}" if flags else "tensorflow/serving"
    )


def test_cli_export_dtype_reaches_export_run(tmp_path, monkeypatch):
    received = export_through_the_cli(["--dtype", "float32"], tmp_path, monkeypatch)
    assert received["dtype"] == "float32"


def test_serving_instructions_name_the_xla_flag_only_when_asked(tmp_path):
    plain = serving.serving_instructions(tmp_path / "translator", sample_text="a")
    compiled = serving.serving_instructions(
        tmp_path / "translator", sample_text="a", xla=True
    )
    assert "xla" not in plain
    assert compiled.count(audit.XLA_SERVER_FLAG) == 1
    assert compiled.replace(f" {audit.XLA_SERVER_FLAG}", "") == plain


@pytest.mark.slow
def test_cli_export_xla_passes_the_op_audit(xla_cli_export):
    """``export --xla`` (the fixtures' XLA export) exits 0, prints the server flag
    in its docker line, and its SavedModel passes the op audit."""
    status, version_dir, printed = xla_cli_export
    assert status == 0, printed
    docker = [line for line in printed.splitlines() if "docker run" in line]
    assert len(docker) == 1 and docker[0].endswith(audit.XLA_SERVER_FLAG)
    op_audit = audit.audit_saved_model(version_dir)
    assert op_audit.ok and op_audit.needs_xla_flag
    assert not set(op_audit.op_types) & op_tables.PYTHON_BOUND_OPS


def test_serving_instructions_quote_paths(tmp_path):
    lines = serving.serving_instructions(
        tmp_path / "with space" / "translator", sample_text="l'été 1989"
    )
    source = (tmp_path / "with space" / "translator").resolve()
    assert f"--mount 'type=bind,source={source},target=/models/translator'" in lines
    assert """-d '{"instances": ["l'"'"'été 1989"]}'""" in lines


def test_sample_sources_come_from_the_run(text_run_dir, tmp_path):
    test_split = pathlib.Path(text_run_dir) / "splits" / "test.tsv"
    expected = [source for source, _ in text.read_pairs(test_split)[:3]]
    assert serving.sample_sources(text_run_dir, 3) == expected
    with pytest.raises(ValueError, match="count must be a positive integer"):
        serving.sample_sources(text_run_dir, 0)

    # A run without splits: a text made of words of its own source vocabulary.
    bare = shutil.copytree(
        text_run_dir, tmp_path / "bare", ignore=shutil.ignore_patterns("splits")
    )
    (sample,) = serving.sample_sources(bare)
    source = text.PairTokenizer.load(bare).source
    # Every token of the sample is in the vocabulary (glued pieces such as "1" +
    # joiner-marked "9" detokenize to "19": compare tokens, not words).
    tokens = [t.decode("utf-8") for t in source.tokenize([sample]).to_list()[0]]
    assert tokens and set(tokens) <= set(
        source.vocabulary.tokens[len(text.RESERVED_TOKENS) :]
    )
