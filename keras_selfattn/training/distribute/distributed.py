"""The workers of a multi-worker job: cluster, start-up rendezvous, roles, lost peers.

* `read_cluster`: the training tasks of ``TF_CONFIG``, read with
  `tf.distribute.cluster_resolver.TFConfigClusterResolver`, the resolver that
  ``MultiWorkerMirroredStrategy`` itself uses.
* `wait_for_peers`: a start-up rendezvous that fails with the unreachable
  address within a bounded time (TensorFlow's own start-up waits for a missing
  peer forever).
* `worker_role`: which worker this process is and whether it is the chief, the
  one that writes the run directory; `all_workers_values` gathers a number from
  every worker.
* `lost_peers_are_errors`: "a collective lost its peer" as a
  `PeerUnreachableError` naming the peer.
"""

import contextlib
import dataclasses
import json
import os
import pathlib
import re
import socket
import time

import tensorflow as tf

__all__ = [
    "Cluster",
    "PeerUnreachableError",
    "WorkerRole",
    "all_workers_values",
    "is_multi_worker",
    "lost_peers_are_errors",
    "read_cluster",
    "split_address",
    "wait_for_peers",
    "worker_role",
]


def is_multi_worker(strategy):
    """Whether ``strategy`` is a `MultiWorkerMirroredStrategy` over several workers."""
    return (
        isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        and strategy.extended._in_multi_worker_mode()
    )


class PeerUnreachableError(ConnectionError):
    """A worker could not reach the others of its ``TF_CONFIG`` cluster in time."""


@dataclasses.dataclass(frozen=True)
class Cluster:
    """The training tasks of ``TF_CONFIG``: the chief (if any), then the workers."""

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


def read_cluster():
    """The training tasks of the ``TF_CONFIG`` environment variable, as a `Cluster`.

    Read with `tf.distribute.cluster_resolver.TFConfigClusterResolver`; the
    training tasks are the ``chief`` (if any), then the ``worker`` tasks, by index
    (``ps`` and ``evaluator`` tasks do not train).

    Returns:
        A `Cluster`, or None when ``TF_CONFIG`` is unset, empty or names fewer
        than two training tasks.

    Raises:
        ValueError: malformed JSON, or a task that is not in the cluster.
    """
    raw = os.environ.get("TF_CONFIG", "")
    if not raw.strip():
        return None
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    try:
        # The resolver takes a JSON list or string for an empty configuration.
        if not isinstance(json.loads(raw), dict):
            raise TypeError("not a JSON object")
        spec = resolver.cluster_spec()
        tasks = tuple(
            (job, index, str(spec.task_address(job, index)))
            for job in ("chief", "worker")
            if job in spec.jobs
            for index in spec.task_indices(job)
        )
        task_type, task_index = resolver.task_type, resolver.task_id
    except (ValueError, TypeError, AttributeError, KeyError) as error:
        # json.JSONDecodeError is a ValueError; ClusterSpec raises TypeError.
        raise ValueError(
            "TF_CONFIG is not valid JSON of the form {'cluster': ..., 'task': ...}: "
            f"{error}. Received: TF_CONFIG={raw!r}"
        ) from None
    if len(tasks) < 2:
        return None
    if not any(t[:2] == (task_type, task_index) for t in tasks):
        raise ValueError(
            f"TF_CONFIG's task {{'type': {task_type!r}, 'index': {task_index!r}}} "
            "is not "
            "one of the cluster's training tasks: "
            f"{[f'{job}:{index}' for job, index, _ in tasks]}. "
            f"Received: TF_CONFIG={raw!r}"
        )
    return Cluster(tasks, task_type, task_index)


def split_address(address, what="TF_CONFIG address"):
    """``"host:port"`` (``"[::1]:port"`` too) -> ``(host, port)``.

    Raises:
        ValueError: naming ``what``, for anything else.
    """
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
    listener = _listen(cluster)
    me = f"{cluster.task_type}:{cluster.task_index}".encode()
    peers = {(job, index) for job, index, _ in cluster.peers}
    reached, heard_from = set(), set()
    deadline = time.monotonic() + timeout
    try:
        while True:
            _reach_peers(cluster, me, reached)
            _hear_from_peers(listener, heard_from)
            if peers <= reached and peers <= heard_from:
                return
            if time.monotonic() > deadline:
                raise _unreached_error(cluster, reached & heard_from, timeout)
            time.sleep(0.2)
    finally:
        listener.close()


def _listen(cluster):
    """A socket listening on this task's own address (a ValueError if it is busy)."""
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
            f"{cluster.task_type} {cluster.task_index} cannot listen on "
            f"{cluster.address} ({error.strerror}): is another job using this port?"
        ) from None
    listener.listen(16)
    listener.settimeout(0.2)
    return listener


def _reach_peers(cluster, me, reached):
    """Sends ``me`` to each peer not yet ``reached``; adds those it reached."""
    for job, index, address in cluster.peers:
        if (job, index) in reached:
            continue
        try:
            with socket.create_connection(split_address(address), timeout=1.0) as conn:
                conn.sendall(me + b"\n")
            reached.add((job, index))
        except OSError:
            pass


def _hear_from_peers(listener, heard_from):
    """Accepts the peers waiting to connect; adds the ``(job, index)`` they send."""
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


def _unreached_error(cluster, met, timeout):
    """The `PeerUnreachableError` naming the peers not ``met`` (both ways)."""
    missing = [
        f"{job} {index} at {address}"
        for job, index, address in cluster.peers
        if (job, index) not in met
    ]
    return PeerUnreachableError(
        f"{cluster.task_type} {cluster.task_index} ({cluster.address}) could not "
        f"reach {', '.join(missing)} within {timeout:g} s. Start every task of "
        "TF_CONFIG, check the addresses and that the ports are open between the "
        "machines."
    )


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
            f"worker {role.index} lost contact with "
            f"{', '.join(named) or 'another worker'} during training "
            f"({first_line}). Restart every worker with the same command: training "
            "resumes from the last "
            f"backup in {pathlib.Path(run_dir) / 'backup'}."
        ) from error


@dataclasses.dataclass(frozen=True)
class WorkerRole:
    """This process's place in the job: ``index`` of ``count``; the chief writes."""

    index: int = 0
    count: int = 1
    is_chief: bool = True


def worker_role(strategy):
    """The `WorkerRole` of this process under ``strategy`` (one worker, or several)."""
    if not is_multi_worker(strategy):
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
    """Every worker's ``value`` (a number), on every worker: a list by worker index."""
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
