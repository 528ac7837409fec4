"""What a TPU needs from the train step, checked on any device (a CPU here).

`audit_train_step` traces the train step and lowers it to XLA's HLO, and
reports the input shapes, the host-side ops and the dynamic shapes that would
keep it off a TPU.
"""

import dataclasses
import re

import keras
import tensorflow as tf

__all__ = ["HOST_OP_TYPES", "StepAudit", "audit_train_step"]

# Ops that run on the host (Python callbacks, printing, string work, summaries):
# a TPU step containing one must leave the chip every step, or fails to compile.
HOST_OP_TYPES = frozenset(
    {
        "PyFunc",
        "PyFuncStateless",
        "EagerPyFunc",
        "Print",
        "PrintV2",
        "StringFormat",
        "Assert",
        "WriteScalarSummary",
        "WriteSummary",
        "WriteHistogramSummary",
        "OutsideCompilation",
        "XlaHostCompute",
        "InfeedDequeue",
        "OutfeedEnqueue",
    }
)


_BOUNDED_SHAPE = re.compile(r"\b[a-z]+[0-9]*\[[0-9,]*<=[0-9]+")


@dataclasses.dataclass
class StepAudit:
    """The result of `audit_train_step`."""

    input_shapes: dict
    static_inputs: bool
    op_types: frozenset
    host_ops: list
    string_ops: list
    dynamic_shape_ops: list
    hlo: str
    compile_error: str = ""

    @property
    def ok(self):
        return (
            self.static_inputs
            and bool(self.hlo)
            and not self.compile_error
            and not self.host_ops
            and not self.string_ops
            and not self.dynamic_shape_ops
        )


def _graph_nodes(graph):
    """Every node of ``graph`` and of the functions it calls (gradients, loops, ifs)."""
    graph_def = graph.as_graph_def()
    return list(graph_def.node) + [
        node for function in graph_def.library.function for node in function.node_def
    ]


def audit_train_step(model, dataset):
    """Checks, on any device, that ``model``'s train step is fit for a TPU.

    Traces ``model.train_step`` on the element spec of ``dataset`` inside a
    ``tf.function(jit_compile=True)`` and reports: whether every input shape is
    static (the batch size included: batch with ``drop_remainder=True`` and pad
    to fixed lengths); the ops that would run on the host (Python functions,
    printing, string ops); the ops whose output shape is not static; and the XLA
    HLO text, which exists only if XLA compiled the whole step. The model must be
    compiled; the step is traced and compiled, not run (no weight changes).

    Returns:
        A `StepAudit`; ``audit.ok`` is the overall verdict.
    """
    signature = tf.nest.map_structure(
        lambda s: tf.TensorSpec(s.shape, s.dtype), dataset.element_spec
    )
    input_shapes = {
        "/".join(map(str, path)) if path else "input": s.shape.as_list()
        for path, s in keras.tree.flatten_with_path(signature)
    }
    static_inputs = all(s.shape.is_fully_defined() for s in tf.nest.flatten(signature))

    @tf.function(jit_compile=True)
    def step(data):
        return model.train_step(data)

    concrete = step.get_concrete_function(signature)
    nodes = _graph_nodes(concrete.graph)
    op_types = frozenset(node.op for node in nodes)
    hlo, dynamic, compile_error = (
        _lower_to_hlo(step, signature) if static_inputs else ("", [], "")
    )
    return StepAudit(
        input_shapes,
        static_inputs,
        op_types,
        sorted(op_types & HOST_OP_TYPES),
        _string_ops(nodes),
        dynamic,
        hlo,
        compile_error,
    )


def _string_ops(nodes):
    """The op types of ``nodes`` with a string attribute (or list of them)."""
    string = tf.string.as_datatype_enum
    return sorted(
        {
            node.op
            for node in nodes
            if any(attr.type == string for attr in node.attr.values())
            or any(string in attr.list.type for attr in node.attr.values())
        }
    )


def _lower_to_hlo(step, signature):
    """``(hlo, dynamic_shape_ops, compile_error)`` of ``step``, lowered on zeros."""
    example = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), signature)
    hlo, compile_error = "", ""
    try:
        # Lowers the whole step to XLA's HLO (no weights change); fails on an
        # op without an XLA kernel or a shape XLA cannot bound.
        hlo = step.experimental_get_compiler_ir(example)(stage="hlo")
    except (tf.errors.OpError, ValueError, TypeError) as error:
        compile_error = (
            (getattr(error, "message", None) or str(error)).strip().splitlines()[0]
        )
    # Bounded-dynamic dimensions print as "f32[<=8]": static shapes have none.
    dynamic = sorted(
        {
            line.split("=", 1)[0].strip()
            for line in hlo.splitlines()
            if _BOUNDED_SHAPE.search(line)
        }
    )
    return hlo, dynamic, compile_error
