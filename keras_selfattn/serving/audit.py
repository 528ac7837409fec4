"""Which ops a SavedModel needs, and whether a stock TF Serving build has them.

TensorFlow Serving's ``tensorflow_model_server`` links core TensorFlow and, since
TF Serving 2.x, the ops of tensorflow-text (``@org_tensorflow_text//tensorflow_text:ops_lib``
in its model_servers BUILD), but a PINNED tensorflow-text, older than the one a
user may have installed:

=====================  =======================
TF Serving release     tensorflow-text linked
=====================  =======================
up to 2.19             2.12.1
2.20 and later         2.20.0
=====================  =======================

A graph that uses an op added to tensorflow-text after the pinned version loads in
Python (where the newer tensorflow_text is imported) and fails in the server with
``Op type not registered``. Core TensorFlow ops (``tf.strings``, lookup tables,
``tf.while_loop``...) are linked by every build.

How the tables below were made (2026-11-30, tensorflow 2.21.0):

- the installed tensorflow_text's ops are DERIVED at run time
  (`installed_op_registry`): a subprocess lists TensorFlow's op registry before
  and after ``import tensorflow_text``; the difference is tensorflow-text's ops.
- the ops of the pinned versions are RECORDED here: tensorflow-text 2.12.1 and
  2.20.0 cannot be imported beside TensorFlow 2.21, so their manylinux cp311
  wheels from PyPI were unpacked and every op name of the installed 2.21.1 was
  looked up as a NUL-terminated string (the ``REGISTER_OP`` literal) in their
  shared objects. 2.20.0 registers the same 38 ops as 2.21.1; 2.12.1 lacks
  three (its wheel has no ``_trimmer_ops.so`` and no ``_utf8_binarize_op.so``).
  `tests/serving/test_audit.py` fails when an installed tensorflow-text
  registers an op this table does not know, so the table is revisited on upgrade.

Limits: the audit compares op NAMES. A core op new in the TensorFlow that
exported the model may be missing from an older server's TensorFlow; serve with
the TF Serving release that matches the exporting TensorFlow (2.21 here) or
newer. Default-valued attributes are stripped at export
(``stripped_default_attrs``), so an op gaining an attribute is usually harmless.
"""

import collections
import dataclasses
import functools
import json
import os
import pathlib
import subprocess
import sys

__all__ = [
    "PYTHON_BOUND_OPS",
    "TF_TEXT_OPS",
    "OpAudit",
    "OpRegistry",
    "audit_ops",
    "audit_saved_model",
    "installed_op_registry",
    "list_op_types",
    "tf_text_version_for_serving",
]

# Ops that call back into a Python interpreter: registered in core TensorFlow, but a
# C++ server has no Python function to call.
PYTHON_BOUND_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

_TF_TEXT_2_20_0 = frozenset(
    {
        "CaseFoldUTF8",
        "ConstrainedSequence",
        "FastBertNormalize",
        "FastWordpieceTokenizeWithOffsets",
        "FindSourceOffsets",
        "MaxSpanningTree",
        "NormalizeUTF8",
        "NormalizeUTF8WithOffsetsMap",
        "PhraseTokenize",
        "RegexSplitWithOffsets",
        "RougeL",
        "SentenceFragments",
        "SentenceFragmentsV2",
        "SentencepieceDetokenizeOp",
        "SentencepieceIdToStringOp",
        "SentencepieceOp",
        "SentencepieceStringToIdOp",
        "SentencepieceTokenizeOp",
        "SentencepieceTokenizeWithOffsetsOp",
        "SentencepieceVocabSizeOp",
        "SplitMergeTokenizeWithOffsets",
        "TFText>BoiseTagsToOffsets",
        "TFText>ByteSplitByOffsets",
        "TFText>ByteSplitWithOffsets",
        "TFText>FastSentencepieceDetokenize",
        "TFText>FastSentencepieceTokenize",
        "TFText>FastWordpieceDetokenize",
        "TFText>NgramsStringJoin",
        "TFText>OffsetsToBoiseTags",
        "TFText>PhraseDetokenize",
        "TFText>RoundRobinGenerateMasks",
        "TFText>RoundRobinTrim",
        "TFText>Utf8Binarize",
        "TFText>WhitespaceTokenizeWithOffsetsV2",
        "TokenizerFromLogits",
        "UnicodeScriptTokenizeWithOffsets",
        "WhitespaceTokenizeWithOffsets",
        "WordpieceTokenizeWithOffsets",
    }
)
_ADDED_AFTER_2_12_1 = frozenset(
    {"TFText>RoundRobinGenerateMasks", "TFText>RoundRobinTrim", "TFText>Utf8Binarize"}
)

#: tensorflow-text version -> the op types it registers (see the module docstring).
TF_TEXT_OPS = {
    "2.12.1": _TF_TEXT_2_20_0 - _ADDED_AFTER_2_12_1,
    "2.20.0": _TF_TEXT_2_20_0,
}


def _version_tuple(version):
    try:
        return tuple(int(part) for part in str(version).split(".")[:2])
    except ValueError:
        raise ValueError(
            f"serving_version must look like '2.19' or '2.20.1'. Received: serving_version={version!r}"
        ) from None


def tf_text_version_for_serving(serving_version):
    """The tensorflow-text version a stock TF Serving release links.

    Args:
        serving_version: a TF Serving release, e.g. ``"2.19"`` or ``"2.20.1"``.

    Returns:
        ``"2.12.1"`` up to TF Serving 2.19, ``"2.20.0"`` from 2.20 on.

    Example:

    >>> tf_text_version_for_serving("2.19.0")
    '2.12.1'
    """
    if _version_tuple(serving_version) < (2, 20):
        return "2.12.1"
    return "2.20.0"


def list_op_types(saved_model_dir):
    """Counts the op types of a SavedModel: its graph and every function in its library.

    Reads ``saved_model.pb`` only (nothing is loaded, no op needs to be registered).

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.

    Returns:
        `collections.Counter` op type -> number of nodes.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    path = pathlib.Path(saved_model_dir) / "saved_model.pb"
    if not path.is_file():
        raise FileNotFoundError(
            f"No saved_model.pb in {saved_model_dir}: not a SavedModel directory"
        )
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString(path.read_bytes())
    counts = collections.Counter()
    for meta_graph in saved_model.meta_graphs:
        counts.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            counts.update(node.op for node in function.node_def)
    return counts


@dataclasses.dataclass(frozen=True)
class OpRegistry:
    """Op names registered by TensorFlow alone and by the installed tensorflow-text.

    Attributes:
        tensorflow_version: ``tf.__version__`` of the interpreter that was asked.
        core: ops registered by ``import tensorflow``.
        tensorflow_text_version: the installed version, or None when not installed.
        tensorflow_text: ops added by ``import tensorflow_text`` (empty when missing).
    """

    tensorflow_version: str
    core: frozenset
    tensorflow_text_version: str | None
    tensorflow_text: frozenset


_REGISTRY_SCRIPT = r"""
import json, sys
import tensorflow as tf
from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session

def registered():
    ops = op_def_pb2.OpList()
    ops.ParseFromString(pywrap_tf_session.TF_GetBuffer(pywrap_tf_session.TF_GetAllOpList()))
    return {op.name for op in ops.op}

core = registered()
try:
    import tensorflow_text
    text_version, text_ops = tensorflow_text.__version__, sorted(registered() - core)
except ImportError:
    text_version, text_ops = None, []
json.dump({"tensorflow": tf.__version__, "core": sorted(core),
           "tensorflow_text": text_version, "tensorflow_text_ops": text_ops}, sys.stdout)
"""


@functools.cache
def installed_op_registry(python=None):
    """Lists the op registry of a fresh interpreter (so nothing this process imported counts).

    Args:
        python: the interpreter to ask (default: this one).

    Returns:
        An `OpRegistry`.
    """
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run(
        [python or sys.executable, "-c", _REGISTRY_SCRIPT],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"Could not list TensorFlow's op registry:\n{done.stderr[-2000:]}"
        )
    data = json.loads(done.stdout)
    return OpRegistry(
        tensorflow_version=data["tensorflow"],
        core=frozenset(data["core"]),
        tensorflow_text_version=data["tensorflow_text"],
        tensorflow_text=frozenset(data["tensorflow_text_ops"]),
    )


@dataclasses.dataclass
class OpAudit:
    """What `audit_ops` found.

    Attributes:
        op_types: every op type of the graph, sorted.
        core: the core TensorFlow ones (served by every build).
        tensorflow_text: the tensorflow-text ones that every checked server links.
        problems: op type -> why a stock TF Serving build cannot run it.
        tf_text_versions: the tensorflow-text versions checked against.
    """

    op_types: list
    core: list
    tensorflow_text: list
    problems: dict
    tf_text_versions: list

    @property
    def ok(self):
        """True when every op serves on the checked TF Serving builds."""
        return not self.problems

    @property
    def core_only(self):
        """True when the graph needs no tensorflow-text op at all."""
        return self.ok and not self.tensorflow_text

    def summary(self):
        """A few human-readable lines."""
        lines = [f"op types ({len(self.op_types)}): {', '.join(self.op_types)}"]
        if self.tensorflow_text:
            lines.append(
                "tensorflow-text ops (linked by stock TF Serving; tensorflow-text "
                f"{' and '.join(self.tf_text_versions)}): {', '.join(self.tensorflow_text)}"
            )
        else:
            lines.append("core TensorFlow ops only: serves on any TF Serving build")
        for op, reason in sorted(self.problems.items()):
            lines.append(f"NOT SERVABLE {op}: {reason}")
        return "\n".join(lines)


def audit_ops(op_types, serving_version=None, registry=None):
    """Sorts op types into core / tensorflow-text / not servable by stock TF Serving.

    Args:
        op_types: iterable of op type names (e.g. `list_op_types(path)`).
        serving_version: the TF Serving release to check against, e.g. ``"2.19"``;
            None checks every release since the tensorflow-text pin (both rows
            of the table in the module docstring).
        registry: an `OpRegistry` (default: `installed_op_registry()`).

    Returns:
        An `OpAudit`.
    """
    registry = registry or installed_op_registry()
    if serving_version is None:
        versions = sorted(TF_TEXT_OPS)
    else:
        versions = [tf_text_version_for_serving(serving_version)]
    linked = frozenset.intersection(*(TF_TEXT_OPS[v] for v in versions))
    op_types = sorted(set(op_types))
    core, text, problems = [], [], {}
    for op in op_types:
        if op in PYTHON_BOUND_OPS:
            problems[op] = (
                "calls back into Python (tf.py_function / tf.numpy_function); a C++ server cannot run it"
            )
        elif op in registry.core:
            core.append(op)
        elif op in linked:
            text.append(op)
        elif (
            any(op in TF_TEXT_OPS[v] for v in versions)
            or op in registry.tensorflow_text
        ):
            missing = [v for v in versions if op not in TF_TEXT_OPS[v]]
            problems[op] = (
                f"tensorflow-text op missing from tensorflow-text {', '.join(missing)}, which "
                + (
                    "TF Serving up to 2.19 links"
                    if "2.12.1" in missing
                    else "stock TF Serving links"
                )
            )
        else:
            problems[op] = (
                f"neither core TensorFlow {registry.tensorflow_version} nor tensorflow-text "
                "(a custom op library?): stock TF Serving does not register it"
            )
    return OpAudit(op_types, core, text, problems, versions)


def audit_saved_model(saved_model_dir, serving_version=None, registry=None):
    """`audit_ops(list_op_types(saved_model_dir), ...)`."""
    return audit_ops(list_op_types(saved_model_dir), serving_version, registry)
