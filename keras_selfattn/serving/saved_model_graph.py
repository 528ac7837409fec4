"""What a SavedModel's graph holds, read from ``saved_model.pb`` alone.

`read_saved_model` parses the file once (nothing is loaded, no op needs to be
registered); the other functions take the parsed protocol buffer: the op types
of the graph and its functions, those that loading and serving would run, the
functions compiled with XLA and the TensorFlow that wrote it.
"""

import collections
import pathlib

# What tf.function(jit_compile=True) marks in a function's (or its call node's)
# attributes.
_XLA_ATTRIBUTE = "_XlaMustCompile"

__all__ = [
    "list_op_types",
    "list_run_op_types",
    "list_xla_functions",
    "producer_version",
    "read_saved_model",
]


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


def list_op_types(saved_model):
    """Counts the op types of a SavedModel: its graph and every function in its library.

    Args:
        saved_model: the parsed SavedModel (`read_saved_model`).

    Returns:
        `collections.Counter` op type -> number of nodes.
    """
    counts = collections.Counter()
    for meta_graph in saved_model.meta_graphs:
        counts.update(node.op for node in meta_graph.graph_def.node)
        for function in meta_graph.graph_def.library.function:
            counts.update(node.op for node in function.node_def)
    return counts


def list_xla_functions(saved_model):
    """The library functions a SavedModel must compile with XLA (``jit_compile``).

    A function counts when its own attributes or a node that calls it carry
    ``_XlaMustCompile = true``.

    Args:
        saved_model: the parsed SavedModel (`read_saved_model`).

    Returns:
        sorted list of function names (empty: no XLA needed).
    """
    names = set()
    for meta_graph in saved_model.meta_graphs:
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


def list_run_op_types(saved_model):
    """Counts the op types that loading and serving a SavedModel would run.

    Starts from every signature's outputs, the init ops (``__saved_model_init_op``,
    ``saved_model_main_op``, ``legacy_init_op``) and the saver's restore op; follows
    node inputs (control inputs too) in the graph and every function a node calls.
    The saver's save function, which a server never runs, is left out.

    Args:
        saved_model: the parsed SavedModel (`read_saved_model`).

    Returns:
        `collections.Counter` op type -> number of nodes.
    """
    counts = collections.Counter()
    for meta_graph in saved_model.meta_graphs:
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


def producer_version(saved_model):
    """The TensorFlow version that wrote a SavedModel (``"2.21.0"``); None if unknown.

    Args:
        saved_model: the parsed SavedModel (`read_saved_model`).

    Returns:
        str or None.
    """
    meta_graph = saved_model.meta_graphs[0]
    return meta_graph.meta_info_def.tensorflow_version or None
