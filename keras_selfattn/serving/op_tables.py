"""What a stock TF Serving build registers: the op tables the audit checks against.

TensorFlow Serving's ``tensorflow_model_server`` links core TensorFlow and, since
TF Serving 2.x, the ops of tensorflow-text
(``@org_tensorflow_text//tensorflow_text:ops_lib`` in its model_servers BUILD), but a
PINNED tensorflow-text, older than the one a user may have installed:

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

The TensorFlow that exported a model bounds its server too (`oldest_serving_release`).
"""

import dataclasses
import functools
import json
import os
import sys

from packaging import version as packaging_version

from keras_selfattn.stopping import run_to_the_end

__all__ = [
    "PYTHON_BOUND_OPS",
    "REFUSED_IO_OPS",
    "TF_TEXT_OPS",
    "WARNED_IO_OPS",
    "OpRegistry",
    "installed_op_registry",
    "oldest_serving_release",
    "parse_release",
    "tf_text_version_for_serving",
]

# Ops that call back into a Python interpreter: registered in core TensorFlow, but a
# C++ server has no Python function to call.
PYTHON_BOUND_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})

_WRITES_FILE = "writes files on the server"
_SUMMARY = "writes TensorBoard event files (or a database) on the server"
_DEBUG = "tfdbg op: dumps tensors to files or network endpoints named in the graph"
#: Op type -> why check-serving refuses to run a graph that would run it.
REFUSED_IO_OPS = {
    "WriteFile": _WRITES_FILE,
    "Save": "writes a checkpoint on the server",
    "SaveSlices": "writes a checkpoint on the server",
    "SaveV2": "writes a checkpoint on the server",
    "MergeV2Checkpoints": "writes and deletes checkpoint files on the server",
    "DumpTensor": _WRITES_FILE,
    "CalibrationStatisticsSaver": _WRITES_FILE,
    "DatasetToTFRecord": _WRITES_FILE,
    "ExperimentalDatasetToTFRecord": _WRITES_FILE,
    "SaveDataset": _WRITES_FILE,
    "SaveDatasetV2": _WRITES_FILE,
    "DistributedSave": _WRITES_FILE,
    "SnapshotDataset": _WRITES_FILE,
    "SnapshotDatasetV2": _WRITES_FILE,
    "FileSystemSetConfiguration": "changes the server's file system configuration",
    "CreateSummaryFileWriter": _SUMMARY,
    "CreateSummaryDbWriter": _SUMMARY,
    "StatsAggregatorSetSummaryWriter": _SUMMARY,
    "WriteSummary": _SUMMARY,
    "WriteScalarSummary": _SUMMARY,
    "WriteHistogramSummary": _SUMMARY,
    "WriteImageSummary": _SUMMARY,
    "WriteAudioSummary": _SUMMARY,
    "WriteGraphSummary": _SUMMARY,
    "WriteRawProtoSummary": _SUMMARY,
    "ImportEvent": _SUMMARY,
    "FlushSummaryWriter": _SUMMARY,
    "CloseSummaryWriter": _SUMMARY,
    "DebugIdentity": _DEBUG,
    "DebugIdentityV2": _DEBUG,
    "DebugIdentityV3": _DEBUG,
    "DebugNanCount": _DEBUG,
    "DebugNumericSummary": _DEBUG,
}
_READS_FILE = "reads files on the server (and can return them in a response)"
#: Op type -> why check-serving warns about a graph that would run it.
WARNED_IO_OPS = {
    "ReadFile": _READS_FILE,
    "ImmutableConst": "maps a file of the server into memory",
    "MatchingFiles": "lists files on the server",
    "MatchingFilesDataset": "lists files on the server",
    "ExperimentalMatchingFilesDataset": "lists files on the server",
    "TFRecordDataset": _READS_FILE,
    "TFRecordDatasetV2": _READS_FILE,
    "TextLineDataset": _READS_FILE,
    "FixedLengthRecordDataset": _READS_FILE,
    "FixedLengthRecordDatasetV2": _READS_FILE,
    "LoadDataset": _READS_FILE,
    "CacheDataset": "with a file name, writes and reads cache files on the server",
    "CacheDatasetV2": "with a file name, writes and reads cache files on the server",
    "WholeFileReader": _READS_FILE,
    "WholeFileReaderV2": _READS_FILE,
    "TextLineReader": _READS_FILE,
    "TextLineReaderV2": _READS_FILE,
    "TFRecordReader": _READS_FILE,
    "TFRecordReaderV2": _READS_FILE,
    "FixedLengthRecordReader": _READS_FILE,
    "FixedLengthRecordReaderV2": _READS_FILE,
    "DecodeProtoV2": "may read a descriptor file named by its descriptor_source",
    "Print": "prints to the server's log",
    "PrintV2": (
        "prints to the server's log (or, with output_stream='file://...', to a file)"
    ),
}

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

_FIRST_TF_TEXT_2_20_RELEASE = (
    2,
    20,
)  # the first TF Serving linking tensorflow-text 2.20.0

#: tensorflow-text version -> the op types it registers (see the module docstring).
TF_TEXT_OPS = {
    "2.12.1": _TF_TEXT_2_20_0 - _ADDED_AFTER_2_12_1,
    "2.20.0": _TF_TEXT_2_20_0,
}


def parse_release(version, name="serving_version"):
    """``"2.19.1"`` -> ``(2, 19)`` (`packaging.version`); a clear error otherwise."""
    try:
        release = packaging_version.Version(str(version)).release
    except packaging_version.InvalidVersion:
        raise ValueError(
            f"{name} must look like '2.19' or '2.20.1'. Received: {name}={version!r}"
        ) from None
    return (release + (0,))[:2]


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
    if parse_release(serving_version) < _FIRST_TF_TEXT_2_20_RELEASE:
        return "2.12.1"
    return "2.20.0"


def oldest_serving_release(op_types, producer=None):
    """The oldest stock TF Serving release that can load a graph, as ``"X.Y"``.

    The newer of the exporting TensorFlow's X.Y (TF Serving X.Y is built on
    TensorFlow X.Y) and the first release that links every tensorflow-text op of
    the graph.

    Args:
        op_types: the graph's op types.
        producer: the TensorFlow version that exported it (`producer_version`);
            None when unknown.

    Returns:
        str, e.g. ``"2.21"``; None when neither bound is known.

    Example:

    >>> oldest_serving_release(["MatMul"], producer="2.21.0")
    '2.21'
    >>> oldest_serving_release(["TFText>Utf8Binarize"], producer="2.15.1")
    '2.20'
    """
    bounds = []
    if producer:
        bounds.append(parse_release(producer, "producer"))
    if set(op_types) & (TF_TEXT_OPS["2.20.0"] - TF_TEXT_OPS["2.12.1"]):
        bounds.append(_FIRST_TF_TEXT_2_20_RELEASE)
    if not bounds:
        return None
    major, minor = max(bounds)
    return f"{major}.{minor}"


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
           "tensorflow_text": text_version, "tensorflow_text_ops": text_ops},
          sys.stdout)
"""


@functools.cache
def installed_op_registry(python=None):
    """Lists a fresh interpreter's op registry (what this process imported aside).

    Args:
        python: the interpreter to ask (default: this one).

    Returns:
        An `OpRegistry`.
    """
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}
    done = run_to_the_end([python or sys.executable, "-c", _REGISTRY_SCRIPT], env, 300)
    if done is None:
        raise RuntimeError("Could not list TensorFlow's op registry within 300 s")
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
