"""The op audit and its tables of what TF Serving links (no model needed)."""

import pytest

from keras_selfattn.serving import audit, op_tables

# One xdist worker runs every serving test, so the session fixtures train once.


@pytest.fixture(scope="module")
def registry():
    return op_tables.installed_op_registry()


@pytest.mark.parametrize(
    "serving_version, tf_text",
    [
        ("2.12", "2.12.1"),
        ("2.19", "2.12.1"),
        ("2.19.1", "2.12.1"),
        ("2.20", "2.20.0"),
        ("2.21.0", "2.20.0"),
        ("3.0", "2.20.0"),
    ],
)
def test_tf_text_pin_by_serving_release(serving_version, tf_text):
    assert op_tables.tf_text_version_for_serving(serving_version) == tf_text


def test_bad_serving_version():
    with pytest.raises(ValueError, match="serving_version must look like"):
        op_tables.tf_text_version_for_serving("latest")


def test_registry_is_derived_from_a_fresh_interpreter(registry):
    assert "MatMul" in registry.core and "StringSplitV2" in registry.core
    assert "CaseFoldUTF8" not in registry.core  # tensorflow_text's, not core
    assert "CaseFoldUTF8" in registry.tensorflow_text
    assert not registry.core & registry.tensorflow_text


def test_recorded_table_knows_every_installed_tf_text_op(registry):
    # Fails when a tensorflow-text upgrade registers an op the table does not know:
    # then check which stock TF Serving builds link it and extend TF_TEXT_OPS.
    assert registry.tensorflow_text_version is not None
    unknown = registry.tensorflow_text - op_tables.TF_TEXT_OPS["2.20.0"]
    assert not unknown, (
        f"tensorflow-text {registry.tensorflow_text_version} registers ops the table "
        f"lacks: {unknown}"
    )
    assert op_tables.TF_TEXT_OPS["2.12.1"] < op_tables.TF_TEXT_OPS["2.20.0"]
    # The ops our tokenizers use are linked by every stock build.
    for op in (
        "CaseFoldUTF8",
        "NormalizeUTF8",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "FastWordpieceTokenizeWithOffsets",
    ):
        assert op in op_tables.TF_TEXT_OPS["2.12.1"]


def test_audit_sorts_ops(registry):
    result = audit.audit_ops(
        [
            "MatMul",
            "While",
            "CaseFoldUTF8",
            "TFText>RoundRobinTrim",
            "PyFunc",
            "MyCustomOp",
        ],
        registry=registry,
    )
    assert result.core == ["MatMul", "While"]
    assert result.tensorflow_text == ["CaseFoldUTF8"]
    assert sorted(result.problems) == ["MyCustomOp", "PyFunc", "TFText>RoundRobinTrim"]
    assert "Python" in result.problems["PyFunc"]
    assert "2.12.1" in result.problems["TFText>RoundRobinTrim"]
    assert "custom op" in result.problems["MyCustomOp"]
    assert not result.ok
    summary = result.summary()
    for op in result.problems:
        assert f"NOT SERVABLE {op}" in summary

    # Against TF Serving 2.20 only, the round-robin trimmer op is linked.
    newer = audit.audit_ops(
        ["MatMul", "TFText>RoundRobinTrim"], serving_version="2.20", registry=registry
    )
    assert newer.ok and newer.tensorflow_text == ["TFText>RoundRobinTrim"]


def test_sentencepiece_ops_are_linked_by_every_checked_serving(registry):
    ops = ["SentencepieceOp", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"]
    for serving_version in (None, "2.12", "2.20"):
        result = audit.audit_ops(
            ["MatMul", *ops], serving_version=serving_version, registry=registry
        )
        assert result.ok and result.tensorflow_text == sorted(ops)
        assert "tensorflow-text ops (linked by stock TF Serving" in result.summary()


def test_core_only_audit(registry):
    result = audit.audit_ops(
        ["MatMul", "StringLower", "LookupTableFindV2"], registry=registry
    )
    assert result.ok and result.core_only
    # Core ops only does not mean any release: the exporting TensorFlow still counts.
    assert "serves on any TF Serving build" not in result.summary()
    assert "no tensorflow-text op needed" in result.summary()


def test_cli_check_serving_on_garbage_is_one_line(tmp_path, capsys):
    from keras_selfattn import cli

    (tmp_path / "saved_model.pb").write_bytes(b"garbage")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["check-serving", str(tmp_path)])
    assert exit_info.value.code == 2
    error = capsys.readouterr().err
    assert "is not a SavedModel" in error and len(error.strip().splitlines()) == 1


def test_io_ops_are_refused_or_warned(registry):
    result = audit.audit_ops(["WriteFile", "ReadFile", "MatMul"], registry=registry)
    assert list(result.problems) == ["WriteFile"]
    assert "writes files" in result.problems["WriteFile"]
    assert list(result.io_warnings) == ["ReadFile"]
    summary = result.summary()
    assert "NOT SERVABLE WriteFile: I/O op refused" in summary
    assert "WARNING I/O op ReadFile" in summary
    # Only the ops that loading and serving run count (not the saver's SaveV2).
    saver = audit.audit_ops(["SaveV2", "MatMul"], registry=registry, run_op_types=[])
    assert saver.ok and not saver.io_warnings


def test_every_listed_io_op_is_a_registered_op(registry):
    listed = set(op_tables.REFUSED_IO_OPS) | set(op_tables.WARNED_IO_OPS)
    assert listed <= registry.core, listed - registry.core
    assert not set(op_tables.REFUSED_IO_OPS) & set(op_tables.WARNED_IO_OPS)


@pytest.mark.parametrize("serving_version", ["1.0", "2.15", "2.20.1"])
def test_older_serving_than_the_exporting_tensorflow_fails(registry, serving_version):
    result = audit.audit_ops(
        ["MatMul"], serving_version, registry=registry, producer="2.21.0"
    )
    assert not result.ok and not result.problems
    (reason,) = result.release_problems
    assert ("1.x" if serving_version == "1.0" else "2.21") in reason
    assert f"NOT SERVABLE on TF Serving {serving_version}" in result.summary()


@pytest.mark.parametrize("serving_version", ["2.21", "2.21.4", "2.22", "3.0"])
def test_same_or_newer_serving_passes(registry, serving_version):
    result = audit.audit_ops(
        ["MatMul"], serving_version, registry=registry, producer="2.21.0"
    )
    assert result.ok and result.oldest_serving == "2.21"
    assert "loads on TF Serving 2.21 or newer" in result.summary()


def test_oldest_serving_release():
    assert op_tables.oldest_serving_release(["MatMul"], "2.21.0") == "2.21"
    # A tensorflow-text op first linked by TF Serving 2.20 raises an older producer.
    assert op_tables.oldest_serving_release(["TFText>Utf8Binarize"], "2.15.1") == "2.20"
    assert op_tables.oldest_serving_release(["TFText>Utf8Binarize"], "2.21.0") == "2.21"
    assert op_tables.oldest_serving_release(["MatMul"]) is None
    with pytest.raises(ValueError, match="producer must look like"):
        op_tables.oldest_serving_release(["MatMul"], "nightly build")


def test_audit_saved_model_parses_the_graph_once(tmp_path, registry, monkeypatch):
    import tensorflow as tf

    from keras_selfattn.serving import saved_model_graph

    class Doubling(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.float32)])
        def double(self, x):
            return x * 2.0

    tf.saved_model.save(Doubling(), str(tmp_path))
    parsed = []
    read = saved_model_graph.read_saved_model

    def counting_read(saved_model_dir):
        parsed.append(saved_model_dir)
        return read(saved_model_dir)

    monkeypatch.setattr(audit, "read_saved_model", counting_read)
    result = audit.audit_saved_model(tmp_path, registry=registry)
    assert parsed == [tmp_path]
    assert result.op_types == sorted(saved_model_graph.list_op_types(read(tmp_path)))
    assert "Mul" in result.op_types and result.producer == tf.__version__
