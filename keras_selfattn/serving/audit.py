"""Whether a stock TF Serving build can load and serve a SavedModel's ops.

The op types come from the graph (`saved_model_graph`), the tables of what each
server links from `op_tables`; `audit_ops` sorts them, `OpAudit` reports.

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

import dataclasses

from keras_selfattn.choices import XLA_SERVER_FLAG
from keras_selfattn.serving.op_tables import (
    PYTHON_BOUND_OPS,
    REFUSED_IO_OPS,
    TF_TEXT_OPS,
    WARNED_IO_OPS,
    installed_op_registry,
    oldest_serving_release,
    parse_release,
    tf_text_version_for_serving,
)
from keras_selfattn.serving.saved_model_graph import (
    list_op_types,
    list_run_op_types,
    list_xla_functions,
    producer_version,
    read_saved_model,
)

__all__ = [
    "XLA_SERVER_FLAG",
    "OpAudit",
    "audit_ops",
    "audit_saved_model",
    "audit_saved_model_proto",
]


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
        op_types: iterable of op type names (e.g. `list_op_types(saved_model)`).
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
    if parse_release(serving_version) < (2, 0):
        return ["TF Serving 1.x cannot load a TensorFlow 2 SavedModel's functions"]
    if oldest is not None and parse_release(serving_version) < parse_release(oldest):
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
    return audit_saved_model_proto(
        read_saved_model(saved_model_dir), serving_version, registry
    )


def audit_saved_model_proto(saved_model, serving_version=None, registry=None):
    """`audit_saved_model` of a SavedModel already parsed (`read_saved_model`)."""
    return audit_ops(
        list_op_types(saved_model),
        serving_version,
        registry,
        run_op_types=list_run_op_types(saved_model),
        producer=producer_version(saved_model),
        xla_functions=list_xla_functions(saved_model),
    )
