"""What `model.fit` needs beyond stock Keras 3 to train under tf.distribute.

* `keras_multi_worker_fix`: the two-line fix that makes Keras 3 ``model.fit`` run
  under ``MultiWorkerMirroredStrategy`` (keras-team/keras#20585), applied only to
  the Keras versions known to need it.
* `read_cluster` / `wait_for_peers`: the ``TF_CONFIG`` cluster, and a start-up
  rendezvous that fails with the unreachable address within a bounded time
  (TensorFlow's own start-up waits for a missing peer forever).
* `worker_role`: which worker this process is and whether it is the chief, the
  one that writes the run directory.
* `use_per_replica_xla`: XLA on the multi-replica path (Keras compiles the whole
  distributed step with XLA, which fails when the replicas sit on several devices).
* `SyncedLossScaleOptimizer`: dynamic loss scaling whose "are the gradients
  finite?" decision is taken by all replicas together.
* `audit_train_step`: what a TPU needs from the train step, checked on a CPU.
"""

import contextlib
import dataclasses
import functools
import json
import os
import pathlib
import re
import socket
import threading
import time
import types
import warnings

import keras
import tensorflow as tf

__all__ = [
    "KERAS_FIX_ENV",
    "KERAS_FIX_VERSIONS",
    "PeerUnreachableError",
    "StepAudit",
    "SyncedLossScaleOptimizer",
    "audit_train_step",
    "keras_multi_worker_fix",
    "keras_needs_multi_worker_fix",
    "lost_peers_are_errors",
    "read_cluster",
    "use_per_replica_xla",
    "wait_for_peers",
    "worker_role",
]

# ---------------------------------------------------------------------------
# keras-team/keras#20585: Keras 3 model.fit under MultiWorkerMirroredStrategy.
# ---------------------------------------------------------------------------

# [first, end): the Keras releases that carry both bugs. Checked on 3.15.1 (this
# project's pin) by the multi-worker tests; the code is the same since 3.0 (the
# first Keras 3) and on the main branch as of keras 3.15. Widen the range only
# after `tests/training/test_keras_fix.py` shows that a new release still needs it.
KERAS_FIX_VERSIONS = ((3, 0), (3, 16))
# "auto" (the version guard decides), "on" (force it: a newer Keras that still
# fails) or "off" (stock Keras: the test that proves the fix is still needed).
KERAS_FIX_ENV = "KERAS_SELFATTN_KERAS_MW_FIX"


def _version_tuple(version):
    parts = []
    for part in str(version).split(".")[:3]:
        digits = "".join(ch for ch in part if ch.isdigit()) or "0"
        parts.append(int(digits))
        if not part.isdigit():  # "0rc1", "0.dev2024": stop at the first suffix
            break
    return tuple(parts)


def keras_needs_multi_worker_fix(version=None):
    """Whether Keras ``version`` (default: the installed one) needs `keras_multi_worker_fix`.

    True for the releases in `KERAS_FIX_VERSIONS`; the ``KERAS_SELFATTN_KERAS_MW_FIX``
    environment variable overrides it with ``on`` or ``off``.
    """
    override = os.environ.get(KERAS_FIX_ENV, "auto").strip().lower()
    if override in ("on", "1", "true"):
        return True
    if override in ("off", "0", "false"):
        return False
    if override != "auto":
        raise ValueError(
            f"{KERAS_FIX_ENV} must be auto, on or off. Received: {override!r}"
        )
    first, end = KERAS_FIX_VERSIONS
    return (
        first
        <= _version_tuple(keras.__version__ if version is None else version)[:2]
        < end
    )


def _keras_tf_trainer():
    # The fix has to reach into the trainer module: the two bugs live in its
    # private functions, and no public hook changes them.
    from keras.src.backend.tensorflow import trainer

    return trainer


def _is_multi_worker(strategy):
    return (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    )


def _first_local_value(strategy, value):
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def _fixed_maybe_symbolic_build(original):
    """Bug 1: the symbolic build averages a *data batch* across replicas.

    Stock Keras calls ``strategy.reduce("MEAN", batch, axis=None)`` on the first
    distributed batch only to learn its shapes and dtypes. Under
    MultiWorkerMirroredStrategy that reduce is a cross-worker collective over a
    dict of int tensors and fails (``ValueError: Attempt to convert a value
    (PerReplica:...)``). The fix takes the first local replica's batch, which has
    the same structure, dtypes and per-replica shapes, and involves no collective.
    """

    @functools.wraps(original)
    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        strategy = self._distribute_strategy
        if (
            strategy is None
            or iterator is None
            or data_batch is not None
            or not _is_multi_worker(strategy)
        ):
            return original(self, iterator=iterator, data_batch=data_batch)
        for _, _, batches in iterator:
            data_batch = tf.nest.map_structure(
                functools.partial(_first_local_value, strategy),
                next(batches),
                expand_composites=False,
            )
            break
        return original(self, iterator=None, data_batch=data_batch)

    _maybe_symbolic_build.keras_selfattn_fix = True
    return _maybe_symbolic_build


def _fixed_reduce_per_replica(original):
    """Bug 2: the per-step logs are averaged along an axis that scalars lack.

    For ``reduction="mean"`` (what ``fit`` and ``evaluate`` use) stock Keras calls
    ``strategy.reduce("MEAN", v, axis=0)`` under MultiWorkerMirroredStrategy, which
    also averages *along* the first axis of each value: a scalar log fails with
    ``Invalid reduction dimension 0 for input with 0 dimensions``. The single-worker
    branch of the same function averages across replicas only (``tf.reduce_mean(
    local_results, axis=0)``); ``axis=None`` is that across workers. ``concat``
    (predict) and ``sum`` are left to Keras.
    """

    @functools.wraps(original)
    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and _is_multi_worker(strategy):
            return tf.nest.map_structure(
                lambda v: strategy.reduce("MEAN", v, axis=None), values
            )
        return original(values, strategy, reduction)

    reduce_per_replica.keras_selfattn_fix = True
    return reduce_per_replica


_fix_lock = threading.Lock()
_fix_depth = 0
_fix_saved = None


@contextlib.contextmanager
def keras_multi_worker_fix(strategy=None):
    """Makes Keras 3 ``model.fit``/``evaluate`` work under MultiWorkerMirroredStrategy.

    Use it around ``fit`` (``train`` does)::

        with keras_multi_worker_fix(strategy):
            model.fit(...)

    Inside, two private Keras functions are replaced by the versions above (bug 1:
    the symbolic build, bug 2: the reduction of the logs); both wrap the originals
    and change behaviour only when the strategy runs on several workers; they are
    restored on exit. Nothing is patched when ``strategy`` is given and is not
    multi-worker, or when Keras is outside `KERAS_FIX_VERSIONS` (a warning then
    says what to do if ``fit`` fails). Nested and repeated use is safe.

    Yields:
        True when the fix is active.
    """
    global _fix_depth, _fix_saved
    if strategy is not None and not _is_multi_worker(strategy):
        yield False
        return
    if not keras_needs_multi_worker_fix():
        first, end = KERAS_FIX_VERSIONS
        if os.environ.get(KERAS_FIX_ENV, "auto").strip().lower() == "auto":
            warnings.warn(
                f"keras {keras.__version__} is outside the versions known to need the multi-worker fix "
                f"({'.'.join(map(str, first))} <= keras < {'.'.join(map(str, end))}); running stock Keras. "
                f"If fit fails with 'Attempt to convert a value (PerReplica' or 'Invalid reduction dimension 0', "
                f"set {KERAS_FIX_ENV}=on.",
                stacklevel=3,
            )
        yield False
        return
    trainer = _keras_tf_trainer()
    with _fix_lock:
        if _fix_depth == 0:
            cls = trainer.TensorFlowTrainer
            _fix_saved = (cls._maybe_symbolic_build, trainer.reduce_per_replica)
            cls._maybe_symbolic_build = _fixed_maybe_symbolic_build(_fix_saved[0])
            trainer.reduce_per_replica = _fixed_reduce_per_replica(_fix_saved[1])
        _fix_depth += 1
    try:
        yield True
    finally:
        with _fix_lock:
            _fix_depth -= 1
            if _fix_depth == 0:
                (
                    trainer.TensorFlowTrainer._maybe_symbolic_build,
                    trainer.reduce_per_replica,
                ) = _fix_saved
                _fix_saved = None


# ---------------------------------------------------------------------------
# The cluster of TF_CONFIG, the start-up rendezvous, this worker's role.
# ---------------------------------------------------------------------------


class PeerUnreachableError(ConnectionError):
    """A worker could not reach the other workers of its ``TF_CONFIG`` cluster in time."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The training tasks of ``TF_CONFIG``: the chief (if any) then the workers, in order."""

    tasks: tuple  # ((job, index, "host:port"), ...)
    task_type: str
    task_index: int

    @property
    def me(self):
        return self.tasks.index(
            next(t for t in self.tasks if t[:2] == (self.task_type, self.task_index))
        )

    @property
    def address(self):
        return self.tasks[self.me][2]

    @property
    def peers(self):
        return [task for i, task in enumerate(self.tasks) if i != self.me]


def read_cluster(tf_config=None):
    """Parses ``TF_CONFIG`` (default: the environment variable) into a `Cluster`.

    Returns None when it names fewer than two training tasks (chief + workers).

    Raises:
        ValueError: malformed JSON, or a task that is not in the cluster.
    """
    raw = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    if not raw or not raw.strip():
        return None
    try:
        config = json.loads(raw) if isinstance(raw, str) else raw
        cluster = config.get("cluster", {})
        tasks = tuple(
            (job, index, str(address))
            for job in ("chief", "worker")
            for index, address in enumerate(cluster.get(job, []))
        )
    except (json.JSONDecodeError, AttributeError, TypeError) as error:
        raise ValueError(
            f"TF_CONFIG is not valid JSON of the form {{'cluster': ..., 'task': ...}}: {error}"
        ) from None
    if len(tasks) < 2:
        return None
    task = config.get("task", {})
    task_type, task_index = task.get("type"), task.get("index")
    if not any(t[:2] == (task_type, task_index) for t in tasks):
        raise ValueError(
            f"TF_CONFIG's task {task!r} is not one of the cluster's training tasks: "
            f"{[f'{job}:{index}' for job, index, _ in tasks]}"
        )
    return Cluster(tasks, task_type, int(task_index))


def split_address(address, what="TF_CONFIG address"):
    """``"host:port"`` (``"[::1]:port"`` too) -> ``(host, port)``; a ValueError names ``what`` otherwise."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{what} must be HOST:PORT. Received: {address!r}")
    return host.strip("[]"), int(port)


def wait_for_peers(cluster, timeout=60.0):
    """Start-up rendezvous: returns once every task of ``cluster`` has reached this one.

    Every task listens on its own ``TF_CONFIG`` port and connects to every other
    task's; a task returns when it has reached all the others and been reached by
    all of them, then frees its port for TensorFlow's server. This runs before
    the strategy is created, because TensorFlow waits for a missing task without
    a limit (the coordination service's leader blocks, and SIGTERM does not stop
    it).

    Raises:
        PeerUnreachableError: after ``timeout`` seconds, naming the tasks (and
            their addresses) that were not reached.
        ValueError: this task's port is busy (another process holds it).
    """
    host, port = split_address(cluster.address)
    listener = socket.socket(
        socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM
    )
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(
            ("" if host not in ("localhost", "127.0.0.1", "::1") else host, port)
        )
    except OSError as error:
        listener.close()
        raise ValueError(
            f"{cluster.task_type} {cluster.task_index} cannot listen on {cluster.address} ({error.strerror}): "
            "is another job using this port?"
        ) from None
    listener.listen(16)
    listener.settimeout(0.2)
    me = f"{cluster.task_type}:{cluster.task_index}".encode()
    reached, heard_from = set(), set()
    deadline = time.monotonic() + timeout
    try:
        while True:
            for job, index, address in cluster.peers:
                if (job, index) in reached:
                    continue
                try:
                    with socket.create_connection(
                        split_address(address), timeout=1.0
                    ) as conn:
                        conn.sendall(me + b"\n")
                    reached.add((job, index))
                except OSError:
                    pass
            try:
                while True:
                    conn, _ = listener.accept()
                    with conn:
                        conn.settimeout(2.0)
                        try:
                            name = conn.recv(64).decode(errors="replace").strip()
                        except OSError:
                            name = ""
                    if ":" in name:
                        job, _, index = name.partition(":")
                        heard_from.add((job, int(index) if index.isdigit() else index))
            except (TimeoutError, BlockingIOError):
                pass
            peers = {(job, index) for job, index, _ in cluster.peers}
            if peers <= reached and peers <= heard_from:
                return
            if time.monotonic() > deadline:
                missing = [
                    f"{job} {index} at {address}"
                    for job, index, address in cluster.peers
                    if (job, index) not in reached or (job, index) not in heard_from
                ]
                raise PeerUnreachableError(
                    f"{cluster.task_type} {cluster.task_index} ({cluster.address}) could not reach "
                    f"{', '.join(missing)} within {timeout:g} s. Start every task of TF_CONFIG, check the "
                    "addresses and that the ports are open between the machines."
                )
            time.sleep(0.2)
    finally:
        listener.close()


_TASK_PATTERN = re.compile(r"/job:(\w+)/replica:\d+/task:(\d+)")
# What a collective raises when a peer died or its connection broke.
_LOST_PEER_ERRORS = (
    tf.errors.UnavailableError,
    tf.errors.AbortedError,
    tf.errors.DeadlineExceededError,
    tf.errors.CancelledError,
)


@contextlib.contextmanager
def lost_peers_are_errors(role, run_dir):
    """Turns "a collective lost its peer" into a `PeerUnreachableError` naming the peer.

    When a worker dies, the survivors' next collective fails within seconds
    (TensorFlow's coordination service notices the missing heartbeat or the closed
    socket) with a long gRPC message; this says which task, at which address, and
    how to resume. Single-worker runs are left alone.
    """
    try:
        yield
    except _LOST_PEER_ERRORS as error:
        if role.count == 1:
            raise
        message = getattr(error, "message", str(error))
        cluster = read_cluster()
        named = []
        for job, index in dict.fromkeys(_TASK_PATTERN.findall(message)):
            address = next(
                (
                    a
                    for j, i, a in (cluster.tasks if cluster else ())
                    if (j, i) == (job, int(index))
                ),
                None,
            )
            if cluster is None or (job, int(index)) != (
                cluster.task_type,
                cluster.task_index,
            ):
                named.append(f"{job} {index}" + (f" at {address}" if address else ""))
        first_line = next(
            (line.strip() for line in message.splitlines() if line.strip()),
            type(error).__name__,
        )
        raise PeerUnreachableError(
            f"worker {role.index} lost contact with {', '.join(named) or 'another worker'} during training "
            f"({first_line}). Restart every worker with the same command: training resumes from the last "
            f"backup in {pathlib.Path(run_dir) / 'backup'}."
        ) from error


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    """This process's place in the job: ``index`` of ``count`` workers; the chief writes."""

    index: int = 0
    count: int = 1
    is_chief: bool = True


def worker_role(strategy):
    """The `WorkerRole` of this process under ``strategy`` (one worker unless multi-worker)."""
    if not _is_multi_worker(strategy):
        return WorkerRole()
    cluster = read_cluster()
    if cluster is not None:
        index, count = cluster.me, len(cluster.tasks)
    else:  # a cluster resolver other than TF_CONFIG's (Slurm, ...)
        index = int(strategy.cluster_resolver.task_id)
        count = strategy.num_replicas_in_sync // len(strategy.extended.worker_devices)
    return WorkerRole(
        index=index, count=count, is_chief=bool(strategy.extended.should_checkpoint)
    )


def all_workers_values(strategy, value, role):
    """Every worker's ``value`` (a number), gathered on every worker: a list by worker index."""
    if role.count == 1:
        return [value]
    local_replicas = len(strategy.extended.worker_devices)
    vector = [0.0] * role.count
    vector[role.index] = float(value) / local_replicas

    @tf.function
    def gather():
        per_replica = strategy.run(lambda: tf.constant(vector, tf.float32))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    return [round(float(v)) for v in gather().numpy()]


# ---------------------------------------------------------------------------
# XLA on the multi-replica path.
# ---------------------------------------------------------------------------


def use_per_replica_xla(model):
    """Compiles each replica's forward and backward pass with XLA.

    Keras 3 puts the whole distributed step (``strategy.run`` and the reduction of
    the logs) into one ``tf.function(jit_compile=True)``; XLA then places the step
    on one device and fails to read the other replicas' variables ("Trying to
    access resource ... located in device CPU:1 from device CPU:0"), and the
    all-reduce cannot be compiled either. Keras' ``jit_compile="auto"`` therefore
    turns XLA off under tf.distribute. This replaces ``model``'s train step (on the
    instance only: nothing is saved with the model) by one that compiles the
    forward pass, the loss and the gradients of each replica with XLA, and leaves
    the all-reduce, the optimizer update and the metrics outside, where
    tf.distribute runs them. Compile the model with ``jit_compile=False``.
    """
    if getattr(model.train_step, "keras_selfattn_per_replica_xla", False):
        return model

    def forward_backward(x, y, sample_weight):
        with tf.GradientTape() as tape:
            y_pred = model(x, training=True)
            loss = model.compute_loss(
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
            )
            scaled_loss = model.optimizer.scale_loss(loss)
        return y_pred, loss, tape.gradient(scaled_loss, model.trainable_variables)

    def train_step(self, data):
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        # A new function for every trace: each replica traces the step on its own
        # device and must capture its own copies of the variables.
        compiled = tf.function(forward_backward, jit_compile=True)
        y_pred, loss, gradients = compiled(x, y, sample_weight)
        self.optimizer.apply(gradients, self.trainable_variables)
        # Keras' own step tracks the loss un-scaled for distribution (the compiled
        # loss is divided by the number of replicas), weighted by the batch size.
        replicas = tf.distribute.get_strategy().num_replicas_in_sync
        loss_tracker = next(metric for metric in self.metrics if metric.name == "loss")
        batch = tf.shape(tf.nest.flatten(x)[0])[0]
        loss_tracker.update_state(
            loss * tf.cast(replicas, loss.dtype), sample_weight=batch
        )
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    train_step.keras_selfattn_per_replica_xla = True
    model.train_step = types.MethodType(train_step, model)
    model.train_function = None  # retrace with the new step
    return model


# ---------------------------------------------------------------------------
# Mixed float16 under tf.distribute.
# ---------------------------------------------------------------------------


@keras.saving.register_keras_serializable(package="keras_selfattn")
class SyncedLossScaleOptimizer(keras.optimizers.LossScaleOptimizer):
    """`keras.optimizers.LossScaleOptimizer` whose skip-or-apply decision spans all replicas.

    Keras 3 decides "apply this step, or skip it and halve the loss scale" from
    each replica's own gradients *before* they are all-reduced (its comment
    assumes they already were). When one replica overflows and another does not,
    stock Keras either applies an inf/NaN update (one worker with several
    devices: it takes the first replica's answer) or lets the workers take
    different branches around the all-reduce (several workers: a hang). Here the
    replicas first agree (one scalar all-reduce, in replica context, before any
    of Keras' own synchronization): if any gradient anywhere is not finite, every
    replica's gradients are marked non-finite and every replica skips the step.
    """

    def apply(self, grads, trainable_variables=None):
        context = tf.distribute.get_replica_context()
        grads = list(grads)
        if context is not None and context.num_replicas_in_sync > 1 and grads:
            local = tf.cast(tf.logical_not(self.check_finite(grads)), tf.float32)
            anywhere = context.all_reduce(tf.distribute.ReduceOp.SUM, local)
            # Poison one dense gradient (an embedding's may be IndexedSlices).
            index = next(
                (
                    i
                    for i, g in enumerate(grads)
                    if g is not None and not isinstance(g, tf.IndexedSlices)
                ),
                next(i for i, g in enumerate(grads) if g is not None),
            )
            gradient = tf.convert_to_tensor(grads[index])
            grads[index] = gradient + tf.where(
                anywhere > 0,
                tf.constant(float("nan"), gradient.dtype),
                tf.zeros([], gradient.dtype),
            )
        return super().apply(grads, trainable_variables)


# ---------------------------------------------------------------------------
# What a TPU needs from the train step, checked without one.
# ---------------------------------------------------------------------------

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
    """Every node of ``graph`` and of the functions it calls (gradients, loops, conditionals)."""
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
    spec = dataset.element_spec

    def to_spec(s):
        return tf.TensorSpec(s.shape, s.dtype)

    signature = tf.nest.map_structure(to_spec, spec)
    input_shapes = {
        "/".join(map(str, path)) if path else "input": s.shape.as_list()
        for path, s in _flatten_with_paths(signature)
    }
    static_inputs = all(s.shape.is_fully_defined() for s in tf.nest.flatten(signature))

    @tf.function(jit_compile=True)
    def step(data):
        return model.train_step(data)

    concrete = step.get_concrete_function(signature)
    nodes = _graph_nodes(concrete.graph)
    op_types = frozenset(node.op for node in nodes)
    host_ops = sorted(op_types & HOST_OP_TYPES)
    string_ops = sorted(
        {
            node.op
            for node in nodes
            if any(
                attr.type == tf.string.as_datatype_enum for attr in node.attr.values()
            )
            or any(
                tf.string.as_datatype_enum in attr.list.type
                for attr in node.attr.values()
            )
        }
    )
    hlo, dynamic, compile_error = "", [], ""
    if static_inputs:
        example = tf.nest.map_structure(lambda s: tf.zeros(s.shape, s.dtype), signature)
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
    return StepAudit(
        input_shapes,
        static_inputs,
        op_types,
        host_ops,
        string_ops,
        dynamic,
        hlo,
        compile_error,
    )


def _flatten_with_paths(structure, prefix=()):
    if isinstance(structure, dict):
        for key in sorted(structure):
            yield from _flatten_with_paths(structure[key], prefix + (key,))
    elif isinstance(structure, (list, tuple)):
        for i, item in enumerate(structure):
            yield from _flatten_with_paths(item, prefix + (i,))
    else:
        yield prefix, structure
