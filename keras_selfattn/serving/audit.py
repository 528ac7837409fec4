"""Which ops a SavedModel needs, and whether a stock TF Serving build has them.

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

The TensorFlow that exported the model matters too: a TF Serving release X.Y
is built on TensorFlow X.Y, and an older one may lack an op or an attribute that
the exporting TensorFlow wrote. The audit reads the SavedModel's producer
(``meta_info_def.tensorflow_version``) and names the oldest TF Serving release that
can load the model: the newer of the exporting TensorFlow's X.Y and the release
that first links every tensorflow-text op the graph uses.

I/O ops. ``check-serving`` RUNS the graph, so the audit also lists the ops that
loading and serving would run (reached from the signatures, the init op and the
restore op, through every called function; the saver's own save function is not
run) that touch the file system: `REFUSED_IO_OPS` (writes: ``WriteFile``,
checkpoint and dataset saving, summary writers, tensor dumps) fail the audit, so
the model is never run; `WARNED_IO_OPS` (reads: ``ReadFile``, file readers and
datasets, ``MatchingFiles``, ``Print``) are reported. Lookup tables initialized
from a text file (the vocabulary assets) are not flagged.

XLA. An export with ``xla=True`` adds no op type that the audit does not know
(checked on the tiny serving runs: the default export's ops, less the scatter and
cond of the default greedy loop's row dropping; its searches are
``StatefulPartitionedCall`` nodes of functions marked ``_XlaMustCompile``), but
``tensorflow_model_server`` compiles such functions on CPU only when started with
``--xla_cpu_compilation_enabled=true`` (experimental; without it the first request
fails). The audit lists those functions (`list_xla_functions`) and names the flag
(`OpAudit.needs_xla_flag`); the graph still counts as servable.

Limits: the audit compares op NAMES (not attributes, not the values of file-name
inputs). Default-valued attributes are stripped at export
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

from packaging import version as packaging_version

__all__ = [
    "PYTHON_BOUND_OPS",
    "REFUSED_IO_OPS",
    "TF_TEXT_OPS",
    "WARNED_IO_OPS",
    "XLA_SERVER_FLAG",
    "OpAudit",
    "OpRegistry",
    "audit_ops",
    "audit_saved_model",
    "installed_op_registry",
    "list_op_types",
    "list_run_op_types",
    "list_xla_functions",
    "oldest_serving_release",
    "producer_version",
    "read_saved_model",
    "tf_text_version_for_serving",
]

# What tf.function(jit_compile=True) marks in a function's (or its call node's)
# attributes, and the model server flag without which a CPU server fails on it.
_XLA_ATTRIBUTE = "_XlaMustCompile"
XLA_SERVER_FLAG = "--xla_cpu_compilation_enabled=true"

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


def _release(version, name="serving_version"):
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
    if _release(serving_version) < _FIRST_TF_TEXT_2_20_RELEASE:
        return "2.12.1"
    return "2.20.0"


def read_saved_model(saved_model_dir):
    """Parses ``saved_model.pb`` (nothing is loaded, no op needs to be registered).

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.

    Returns:
        The ``tensorflow.SavedModel`` protocol buffer.

    Raises:
        FileNotFoundError: no ``saved_model.pb`` in the directory.
        ValueError: the file is not a SavedModel (garbage, or no meta graph).
    """
    from google.protobuf.message import DecodeError
    from tensorflow.core.protobuf import saved_model_pb2

    path = pathlib.Path(saved_model_dir) / "saved_model.pb"
    if not path.is_file():
        raise FileNotFoundError(
            f"No saved_model.pb in {saved_model_dir}: not a SavedModel directory"
        )
    saved_model = saved_model_pb2.SavedModel()
    try:
        saved_model.ParseFromString(path.read_bytes())
    except DecodeError as error:
        raise ValueError(
            f"{path} is not a SavedModel protocol buffer ({error})"
        ) from None
    if not saved_model.meta_graphs:
        raise ValueError(f"{path} holds no meta graph: not a SavedModel")
    return saved_model


def list_op_types(saved_model_dir):
    """Counts the op types of a SavedModel: its graph and every function in its library.

    Reads ``saved_model.pb`` only (nothing is loaded, no op needs to be registered).

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.

    Returns:
        `collections.Counter` op type -> number of nodes.
    """
    counts = collections.Counter()
    for meta_graph in read_saved_model(saved_model_dir).meta_graphs:
        counts.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            counts.update(node.op for node in function.node_def)
    return counts


def list_xla_functions(saved_model_dir):
    """The library functions a SavedModel must compile with XLA (``jit_compile``).

    A function counts when its own attributes or a node that calls it carry
    ``_XlaMustCompile = true``.

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.

    Returns:
        sorted list of function names (empty: no XLA needed).
    """
    names = set()
    for meta_graph in read_saved_model(saved_model_dir).meta_graphs:
        library = meta_graph.graph_def.library
        nodes = list(meta_graph.graph_def.node)
        for function in library.function:
            if _XLA_ATTRIBUTE in function.attr and function.attr[_XLA_ATTRIBUTE].b:
                names.add(function.signature.name)
            nodes += function.node_def
        functions = {f.signature.name for f in library.function}
        for node in nodes:
            if _XLA_ATTRIBUTE in node.attr and node.attr[_XLA_ATTRIBUTE].b:
                names.update(n for n in _called_functions(node, functions))
    return sorted(names)


def _called_functions(node, library):
    """The library functions a node calls (``f``, ``body``, ``then_branch``...)."""
    names = [node.op] if node.op in library else []
    for attr in node.attr.values():
        if attr.HasField("func"):
            names.append(attr.func.name)
        elif attr.HasField("list"):
            names += [function.name for function in attr.list.func]
    return names


def _tensor_node_names(info):
    """The graph nodes behind a signature's `TensorInfo` (dense or sparse)."""
    names = [info.name]
    if info.HasField("coo_sparse"):
        sparse = info.coo_sparse
        names = [
            sparse.values_tensor_name,
            sparse.indices_tensor_name,
            sparse.dense_shape_tensor_name,
        ]
    elif info.HasField("composite_tensor"):
        names = [c.name for c in info.composite_tensor.components]
    return [name.lstrip("^").split(":")[0] for name in names if name]


def list_run_op_types(saved_model_dir):
    """Counts the op types that loading and serving a SavedModel would run.

    Starts from every signature's outputs, the init ops (``__saved_model_init_op``,
    ``saved_model_main_op``, ``legacy_init_op``) and the saver's restore op; follows
    node inputs (control inputs too) in the graph and every function a node calls.
    The saver's save function, which a server never runs, is left out.

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.

    Returns:
        `collections.Counter` op type -> number of nodes.
    """
    counts = collections.Counter()
    for meta_graph in read_saved_model(saved_model_dir).meta_graphs:
        graph = meta_graph.graph_def
        nodes = {node.name: node for node in graph.node}
        library = {f.signature.name: f for f in graph.library.function}
        pending = [
            name
            for signature in meta_graph.signature_def.values()
            for info in signature.outputs.values()
            for name in _tensor_node_names(info)
        ]
        for key in ("saved_model_main_op", "legacy_init_op", "saved_model_init_op"):
            if key in meta_graph.collection_def:
                pending += list(meta_graph.collection_def[key].node_list.value)
        if meta_graph.HasField("saver_def"):
            pending.append(meta_graph.saver_def.restore_op_name)
        seen, functions = set(), []
        while pending:
            name = pending.pop().lstrip("^").split(":")[0]
            if name in seen or name not in nodes:
                continue
            seen.add(name)
            node = nodes[name]
            counts[node.op] += 1
            pending += list(node.input)
            functions += _called_functions(node, library)
        called = set()
        while functions:
            name = functions.pop()
            if name in called or name not in library:
                continue
            called.add(name)
            for node in library[name].node_def:
                counts[node.op] += 1
                functions += _called_functions(node, library)
    return counts


def producer_version(saved_model_dir):
    """The TensorFlow version that wrote a SavedModel (``"2.21.0"``); None if unknown.

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.

    Returns:
        str or None.
    """
    meta_graph = read_saved_model(saved_model_dir).meta_graphs[0]
    return meta_graph.meta_info_def.tensorflow_version or None


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
        bounds.append(_release(producer, "producer"))
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
        core: the core TensorFlow ones.
        tensorflow_text: the tensorflow-text ones that every checked server links.
        problems: op type -> why a stock TF Serving build cannot (or check-serving
            will not) run it.
        tf_text_versions: the tensorflow-text versions checked against.
        io_warnings: op type -> what the op does on the server (`WARNED_IO_OPS`).
        producer: the TensorFlow version that exported the model, or None.
        oldest_serving: the oldest TF Serving release that can load the model
            (`oldest_serving_release`), or None when unknown.
        serving_version: the TF Serving release checked against, or None (all).
        release_problems: why ``serving_version`` cannot load the model.
    """

    op_types: list
    core: list
    tensorflow_text: list
    problems: dict
    tf_text_versions: list
    io_warnings: dict = dataclasses.field(default_factory=dict)
    producer: str | None = None
    oldest_serving: str | None = None
    serving_version: str | None = None
    release_problems: list = dataclasses.field(default_factory=list)
    xla_functions: list = dataclasses.field(default_factory=list)

    @property
    def needs_xla_flag(self):
        """True when the graph holds XLA-compiled functions: a CPU model server
        must run with `XLA_SERVER_FLAG`."""
        return bool(self.xla_functions)

    @property
    def ok(self):
        """True when every op serves on the checked TF Serving releases."""
        return not self.problems and not self.release_problems

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
                f"{' and '.join(self.tf_text_versions)}): "
                f"{', '.join(self.tensorflow_text)}"
            )
        else:
            lines.append(
                "core TensorFlow ops only: no tensorflow-text op needed"
                " (the TensorFlow version still matters, see below)"
            )
        exported = (
            f"TensorFlow {self.producer}"
            if self.producer
            else "an unrecorded TensorFlow"
        )
        if self.oldest_serving:
            lines.append(
                f"exported by {exported}: loads on TF Serving {self.oldest_serving} or "
                "newer"
            )
        else:
            lines.append(
                f"exported by {exported}: serve it with the TF Serving release of the "
                "TensorFlow that exported it, or newer"
            )
        if self.needs_xla_flag:
            lines.append(
                f"XLA: {len(self.xla_functions)} function(s) compiled with XLA "
                f"(exported with xla=True): on CPU run tensorflow_model_server with "
                f"{XLA_SERVER_FLAG} (experimental); without it the first request "
                "fails"
            )
        for op, reason in sorted(self.io_warnings.items()):
            lines.append(f"WARNING I/O op {op}: {reason}")
        for op, reason in sorted(self.problems.items()):
            lines.append(f"NOT SERVABLE {op}: {reason}")
        for reason in self.release_problems:
            lines.append(f"NOT SERVABLE on TF Serving {self.serving_version}: {reason}")
        return "\n".join(lines)


def audit_ops(
    op_types,
    serving_version=None,
    registry=None,
    *,
    run_op_types=None,
    producer=None,
    xla_functions=(),
):
    """Sorts op types into core / tensorflow-text / not servable by stock TF Serving.

    Args:
        op_types: iterable of op type names (e.g. `list_op_types(path)`).
        serving_version: the TF Serving release to check against, e.g. ``"2.19"``;
            None checks every release since the tensorflow-text pin (both rows
            of the table in the module docstring).
        registry: an `OpRegistry` (default: `installed_op_registry()`).
        run_op_types: the op types that loading and serving would run, checked
            against `REFUSED_IO_OPS` and `WARNED_IO_OPS` (default: ``op_types``).
        producer: the TensorFlow version that exported the graph (e.g. ``"2.21.0"``).
        xla_functions: the functions it compiles with XLA (`list_xla_functions`).

    Returns:
        An `OpAudit`.
    """
    registry = registry or installed_op_registry()
    if serving_version is None:
        versions = sorted(TF_TEXT_OPS)
    else:
        versions = [tf_text_version_for_serving(serving_version)]
    op_types = sorted(set(op_types))
    run_op_types = set(op_types if run_op_types is None else run_op_types)
    core, text, problems = _sort_ops(op_types, registry, versions)
    for op in sorted(run_op_types & set(REFUSED_IO_OPS)):
        problems[op] = (
            f"I/O op refused: {REFUSED_IO_OPS[op]}; "
            "check-serving will not run this graph"
        )
    io_warnings = {
        op: WARNED_IO_OPS[op] for op in sorted(run_op_types & set(WARNED_IO_OPS))
    }
    oldest = oldest_serving_release(op_types, producer)
    return OpAudit(
        op_types,
        core,
        text,
        problems,
        versions,
        io_warnings=io_warnings,
        producer=producer,
        oldest_serving=oldest,
        serving_version=None if serving_version is None else str(serving_version),
        release_problems=_release_problems(serving_version, oldest, producer),
        xla_functions=sorted(xla_functions),
    )


def _sort_ops(op_types, registry, versions):
    """(core ops, linked tensorflow-text ops, {op: why stock TF Serving lacks it})."""
    linked = frozenset.intersection(*(TF_TEXT_OPS[v] for v in versions))
    core, text, problems = [], [], {}
    for op in op_types:
        if op in PYTHON_BOUND_OPS:
            problems[op] = (
                "calls back into Python (tf.py_function / tf.numpy_function); "
                "a C++ server cannot run it"
            )
        elif op in registry.core:
            core.append(op)
        elif op in linked:
            text.append(op)
        else:
            problems[op] = _unlinked_op_problem(op, registry, versions)
    return core, text, problems


def _unlinked_op_problem(op, registry, versions):
    """Why stock TF Serving (``versions``: its tensorflow-text pins) lacks ``op``."""
    if any(op in TF_TEXT_OPS[v] for v in versions) or op in registry.tensorflow_text:
        missing = [v for v in versions if op not in TF_TEXT_OPS[v]]
        servers = "TF Serving up to 2.19" if "2.12.1" in missing else "stock TF Serving"
        return (
            f"tensorflow-text op missing from tensorflow-text {', '.join(missing)}, "
            f"which {servers} links"
        )
    return (
        f"neither core TensorFlow {registry.tensorflow_version} nor tensorflow-text "
        "(a custom op library?): stock TF Serving does not register it"
    )


def _release_problems(serving_version, oldest, producer):
    """Why TF Serving ``serving_version`` cannot load the model (none: empty)."""
    if serving_version is None:
        return []
    if _release(serving_version) < (2, 0):
        return ["TF Serving 1.x cannot load a TensorFlow 2 SavedModel's functions"]
    if oldest is not None and _release(serving_version) < _release(oldest):
        exporter = (
            f" (exported by TensorFlow {producer}: an older TensorFlow may lack "
            "its ops or their attributes)"
            if producer
            else ""
        )
        return [
            f"older than {oldest}, the oldest release that can load this model"
            + exporter
        ]
    return []


def audit_saved_model(saved_model_dir, serving_version=None, registry=None):
    """Audits a SavedModel's ops, I/O ops and producer version (`audit_ops`).

    Args:
        saved_model_dir: a SavedModel directory, e.g. ``BASE/1``.
        serving_version: the TF Serving release to check against; None: all.
        registry: an `OpRegistry` (default: `installed_op_registry()`).

    Returns:
        An `OpAudit`.
    """
    return audit_ops(
        list_op_types(saved_model_dir),
        serving_version,
        registry,
        run_op_types=list_run_op_types(saved_model_dir),
        producer=producer_version(saved_model_dir),
        xla_functions=list_xla_functions(saved_model_dir),
    )
