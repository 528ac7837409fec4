"""The op audit and its tensorflow-text table (no model needed)."""

import pytest

from keras_selfattn.serving import audit

# One xdist worker runs every serving test, so the session fixtures train once.
pytestmark = pytest.mark.xdist_group("serving")


@pytest.fixture(scope="module")
def registry():
    return audit.installed_op_registry()


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
    assert audit.tf_text_version_for_serving(serving_version) == tf_text


def test_bad_serving_version():
    with pytest.raises(ValueError, match="serving_version must look like"):
        audit.tf_text_version_for_serving("latest")


def test_registry_is_derived_from_a_fresh_interpreter(registry):
    assert "MatMul" in registry.core and "StringSplitV2" in registry.core
    assert "CaseFoldUTF8" not in registry.core  # tensorflow_text's, not core
    assert "CaseFoldUTF8" in registry.tensorflow_text
    assert not registry.core & registry.tensorflow_text


def test_recorded_table_knows_every_installed_tf_text_op(registry):
    # Fails when a tensorflow-text upgrade registers an op the table does not know:
    # then check which stock TF Serving builds link it and extend TF_TEXT_OPS.
    assert registry.tensorflow_text_version is not None
    unknown = registry.tensorflow_text - audit.TF_TEXT_OPS["2.20.0"]
    assert not unknown, (
        f"tensorflow-text {registry.tensorflow_text_version} registers ops the table lacks: {unknown}"
    )
    assert audit.TF_TEXT_OPS["2.12.1"] < audit.TF_TEXT_OPS["2.20.0"]
    # The ops our tokenizers use are linked by every stock build.
    for op in (
        "CaseFoldUTF8",
        "NormalizeUTF8",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "FastWordpieceTokenizeWithOffsets",
    ):
        assert op in audit.TF_TEXT_OPS["2.12.1"]


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


def test_core_only_audit(registry):
    result = audit.audit_ops(
        ["MatMul", "StringLower", "LookupTableFindV2"], registry=registry
    )
    assert result.ok and result.core_only
    # Core ops only does not mean any release: the exporting TensorFlow still counts.
    assert "serves on any TF Serving build" not in result.summary()
    assert "no tensorflow-text op needed" in result.summary()


def test_list_op_types_reads_function_bodies(tmp_path):
    import tensorflow as tf

    class Looping(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
        def count(self, n):
            return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)])[0]

    tf.saved_model.save(Looping(), str(tmp_path))
    ops = audit.list_op_types(tmp_path)
    assert {"Less", "AddV2"} <= set(
        ops
    )  # they live only in the loop's cond/body functions
    assert {"While", "StatelessWhile"} & set(ops)
    with pytest.raises(FileNotFoundError, match="not a SavedModel"):
        audit.list_op_types(tmp_path / "variables")
