"""Reading a SavedModel's graph from saved_model.pb alone."""

import pytest

from keras_selfattn.serving import saved_model_graph


def test_list_op_types_reads_function_bodies(tmp_path):
    import tensorflow as tf

    class Looping(tf.Module):
        @tf.function(input_signature=[tf.TensorSpec([], tf.int32)])
        def count(self, n):
            return tf.while_loop(lambda i: i < n, lambda i: i + 1, [tf.constant(0)])[0]

    module = Looping()
    module.weight = tf.Variable(1.0)  # gives the SavedModel a saver (save / restore)
    tf.saved_model.save(module, str(tmp_path))
    saved_model = saved_model_graph.read_saved_model(tmp_path)
    ops = saved_model_graph.list_op_types(saved_model)
    assert {"Less", "AddV2"} <= set(
        ops
    )  # they live only in the loop's cond/body functions
    assert {"While", "StatelessWhile"} & set(ops)
    with pytest.raises(FileNotFoundError, match="not a SavedModel"):
        saved_model_graph.read_saved_model(tmp_path / "variables")

    # What loading and serving run: the loop bodies and the restore function, but
    # not the saver's save function (SaveV2 would otherwise be an I/O op to refuse).
    run_ops = saved_model_graph.list_run_op_types(saved_model)
    assert {"Less", "AddV2", "RestoreV2"} <= set(run_ops)
    assert {"SaveV2", "MergeV2Checkpoints"} <= set(ops)
    assert not {"SaveV2", "MergeV2Checkpoints"} & set(run_ops)
    assert saved_model_graph.producer_version(saved_model) == tf.__version__


@pytest.mark.parametrize("content", [b"garbage", b""])
def test_garbage_saved_model_is_a_clear_error(tmp_path, content):
    (tmp_path / "saved_model.pb").write_bytes(content)
    with pytest.raises(ValueError, match="not a SavedModel"):
        saved_model_graph.read_saved_model(tmp_path)
