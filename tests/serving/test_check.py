"""`keras-selfattn check-serving`: op audit, session-loader replay, bad requests,
core-only proof."""

import contextlib
import io
import signal
import subprocess

import keras
import pytest
import tensorflow as tf

from keras_selfattn import cli, serving
from keras_selfattn.reserved_ids import UNK_TOKEN
from keras_selfattn.serving import check as check_lib
from keras_selfattn.serving import warmup
from tests.serving.tiny_runs import BEAM_SIZE, TINY_MODEL

TF_RELEASE = ".".join(tf.__version__.split(".")[:2])

# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def text_check(text_export):
    return serving.check_serving(text_export)


def results_by_name(check, signature):
    return {r["name"]: r for r in check.results if r["signature"] == signature}


def test_text_export_passes(text_check):
    assert text_check.ok, text_check.summary()
    assert text_check.tensorflow_text_imported is True
    audit = text_check.audit
    assert "CaseFoldUTF8" in audit.tensorflow_text
    assert "TFText>WhitespaceTokenizeWithOffsetsV2" in audit.tensorflow_text
    assert {"While", "LookupTableFindV2", "UnicodeTranscode"} <= set(
        audit.core
    )  # function bodies included
    assert not audit.core_only
    # Every warmup record ran, under the signature it names.
    assert sum(r["name"].startswith("warmup[") for r in text_check.results) == len(
        serving.read_warmup_requests(text_check.path)
    )


def test_bad_requests_have_defined_outputs(text_check):
    batches = warmup.bad_request_batches()
    for signature, (text_key, score_key) in {
        "serving_default": ("translation", "score"),
        "translate_nbest": ("translations", "scores"),
    }.items():
        results = results_by_name(text_check, signature)
        for name, batch in batches.items():
            result = results[name]
            assert result["ok"], (signature, name, result["error"])
            assert result["seconds"] < 30, (
                signature,
                name,
                "too slow: a hang in the making",
            )
            shape = result["outputs"][text_key]["shape"]
            assert shape == (
                [len(batch)]
                if signature == "serving_default"
                else [len(batch), BEAM_SIZE]
            )
            assert all(
                isinstance(v, str) for v in result["outputs"][text_key]["values"]
            )
            # The longest possible output: max_target_len tokens of the char target
            # tokenizer, each one character or "<unk>", with a space before each
            # token not glued to the one before it (joiner marks).
            longest = TINY_MODEL.max_target_len * (len(UNK_TOKEN) + 1)
            assert all(len(v) <= longest for v in result["outputs"][text_key]["values"])
        blank = results["empty_strings"]["outputs"]
        assert set(blank[text_key]["values"]) == {""} and set(
            blank[score_key]["values"]
        ) == {0.0}
        assert results["empty_batch"]["outputs"][score_key]["shape"][0] == 0


@pytest.fixture(scope="module")
def core_check_through_the_cli(core_export):
    """``keras-selfattn check-serving`` of the core-ops export: ``(its exit status,
    what it printed, the check its job returned)``. One replay serves the tests of
    the check and of the command."""
    from keras_selfattn import serving

    check_serving = serving.check_serving
    returned = []

    def recording(*args, **kwargs):
        returned.append(check_serving(*args, **kwargs))
        return returned[-1]

    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(serving, "check_serving", recording)
        status = cli.main(["check-serving", str(core_export)])
    (check,) = returned
    return status, printed.getvalue(), check


def test_core_export_serves_without_tensorflow_text(core_check_through_the_cli):
    *_, check = core_check_through_the_cli
    assert check.ok, check.summary()
    assert check.audit.core_only and not check.audit.tensorflow_text
    assert check.tensorflow_text_imported is False
    assert "WITHOUT tensorflow_text" in check.summary()


def test_cli_check_serving(core_check_through_the_cli):
    """Without --verbose, a passed check is one line: no op list, no request."""
    status, out, check = core_check_through_the_cli
    assert status == 0, out
    (line,) = out.splitlines()
    assert line.startswith(f"check-serving: OK: {check.path}: "), line
    assert "(core TensorFlow ops only)" in line, line
    assert "serves on any TF Serving build" not in out
    assert f"loads on TF Serving {TF_RELEASE} or newer" in line, line
    assert "op types (" + str(len(check.audit.op_types)) + "):" not in out
    assert "  ok " not in out
    assert "core TensorFlow ops only: no tensorflow-text op needed" in check.summary()


def test_cli_check_serving_compares_the_serving_version(core_export, capsys):
    # TF Serving 1.0 and 2.15 are older than the TensorFlow that exported the model.
    for old in ("1.0", "2.15"):
        assert (
            cli.main(["check-serving", "--serving-version", old, str(core_export)]) == 1
        )
        out = capsys.readouterr().out
        assert f"NOT SERVABLE on TF Serving {old}" in out
        assert f"loads on TF Serving {TF_RELEASE} or newer" in out
        assert "check-serving: FAILED" in out


def test_cli_check_serving_help_says_it_runs_the_model(capsys):
    with pytest.raises(SystemExit):
        cli.main(["check-serving", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "LOADS AND RUNS the model's graph" in out
    assert "Check only models you trust" in out and "WriteFile" in out


def save_module(path, function):
    """A SavedModel with one signature, saved with ExportArchive as the real export
    is."""
    archive = keras.export.ExportArchive()
    archive.add_endpoint(
        "serving_default", function, [tf.TensorSpec([None], tf.string, name="text")]
    )
    archive.write_out(str(path), verbose=False)
    return path


def test_check_fails_naming_python_and_newer_tf_text_ops(tmp_path, capsys):
    import tensorflow_text

    def python_bound(text):
        length = tf.py_function(lambda t: tf.strings.length(t), [text], tf.int32)
        return {"translation": text, "score": tf.cast(length, tf.float32)}

    def newer_tf_text(
        text,
    ):  # utf8_binarize: TFText>Utf8Binarize, added after tensorflow-text 2.12.1
        bits = tensorflow_text.utf8_binarize(text, word_length=4, bits_per_char=8)
        return {"translation": text, "score": tf.reduce_sum(bits, axis=-1)}

    python_dir = save_module(tmp_path / "python" / "1", python_bound)
    assert cli.main(["check-serving", str(python_dir)]) == 1
    out = capsys.readouterr().out
    assert "NOT SERVABLE EagerPyFunc" in out and "check-serving: FAILED" in out

    newer_dir = save_module(tmp_path / "newer" / "1", newer_tf_text)
    check = serving.check_serving(newer_dir, run=False)
    assert not check.ok
    assert list(check.audit.problems) == ["TFText>Utf8Binarize"]
    assert "2.12.1" in check.audit.problems["TFText>Utf8Binarize"]
    # TF Serving 2.20+ links tensorflow-text 2.20.0, which has it; 2.20 is still
    # older than the TensorFlow that exported the graph, the same release is not.
    on_2_20 = serving.check_serving(newer_dir, serving_version="2.20", run=False)
    assert not on_2_20.audit.problems and on_2_20.audit.release_problems
    assert serving.check_serving(newer_dir, serving_version=TF_RELEASE, run=False).ok


def test_check_reports_a_hang_or_crash_as_a_problem(text_export, tmp_path):
    # A replay that cannot finish in time is a failure, not a wait.
    check = serving.check_serving(text_export, timeout=1)
    assert not check.ok
    assert any("did not finish within 1 s" in p for p in check.problems)


def test_malformed_requests_are_rejected_in_the_replay(text_check):
    assert not text_check.audit.io_warnings
    assert text_check.audit.oldest_serving == TF_RELEASE
    for signature, rank in {
        "serving_default": 1,
        "translate_nbest": 1,
        "serve": 2,
    }.items():
        results = results_by_name(text_check, signature)
        for name in warmup.malformed_inputs(rank):
            result = results[name]
            assert result["expect"] == "InvalidArgumentError"
            assert not result["ok"] and result["error"].startswith(
                "InvalidArgumentError"
            ), (signature, name, result)
    assert "rejected: InvalidArgumentError" in text_check.summary()


def test_a_signature_without_shape_checks_fails_the_replay(tmp_path):
    def unchecked(text):  # answers whatever shape it is fed
        return {"translation": text, "score": tf.zeros(tf.shape(text), tf.float32)}

    check = serving.check_serving(save_module(tmp_path / "unchecked" / "1", unchecked))
    assert not check.ok
    for name in ("rank_0", "shape_1x2"):
        assert any(
            p.startswith(f"serving_default/{name}: answered")
            and "instead of InvalidArgumentError" in p
            for p in check.problems
        ), check.problems
    # The well-formed bad requests still answer.
    assert results_by_name(check, "serving_default")["mixed"]["ok"]


def test_a_graph_that_writes_files_is_refused_unrun(tmp_path):
    target = tmp_path / "written-by-the-model.txt"

    def writes(text):
        write = tf.io.write_file(str(target), tf.strings.reduce_join(text))
        with tf.control_dependencies([write]):
            return {
                "translation": tf.identity(text),
                "score": tf.zeros(tf.shape(text), tf.float32),
            }

    check = serving.check_serving(save_module(tmp_path / "writer" / "1", writes))
    assert not check.ok
    assert any(p.startswith("op WriteFile: I/O op refused") for p in check.problems)
    assert check.results == [] and check.tensorflow_text_imported is None
    assert not target.exists(), "check-serving ran a graph it refused"


def test_a_crashed_replay_names_the_request():
    done = subprocess.CompletedProcess(
        [],
        -signal.SIGSEGV,
        "",
        "replaying: serving_default/warmup[0]\nreplaying: serving_default/rank_0\n",
    )
    message = check_lib._replay_failure(done)
    assert "killed by SIGSEGV" in message
    assert "while running serving_default/rank_0" in message


def test_a_replay_that_exits_is_not_called_a_crash():
    done = subprocess.CompletedProcess(
        [],
        1,
        "",
        "replaying: serving_default/warmup[0]\nTraceback ...\nKeyError: 'x'\n",
    )
    message = check_lib._replay_failure(done)
    assert message.startswith("the session-loader replay failed (exit status 1)")
    assert "\n" not in message and "KeyError: 'x'" in message
    assert "die the same way" not in message


def test_a_version_that_does_not_load_is_one_problem_line(core_export, tmp_path):
    """A damaged variables file: TF Serving refuses that version (and keeps the
    others): "does not load: FILE: reason", one line, not a crash."""
    import shutil

    version = tmp_path / "1"
    shutil.copytree(core_export, version)
    data = next((version / "variables").glob("variables.data-*"))
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    check = serving.check_serving(version)
    assert not check.ok and len(check.problems) == 1, check.problems
    problem = check.problems[0]
    assert problem.startswith(f"does not load: {version}"), problem
    assert "\n" not in problem and "keeps serving the others" in problem
    assert "crashed" not in problem and "Traceback" not in problem
