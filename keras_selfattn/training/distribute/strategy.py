"""Choosing the tf.distribute strategy a run trains under."""

import os
import socket
import time

import tensorflow as tf

from keras_selfattn.choices import STRATEGIES
from keras_selfattn.training.distribute.distributed import (
    read_cluster,
    split_address,
    wait_for_peers,
)

__all__ = ["STRATEGIES", "get_strategy", "set_threads", "split_cpu"]

# One strategy object per kind and devices for the life of the process: two
# MirroredStrategy objects over the same devices hand out the same collective
# keys, and the second one's all-reduces then fail with "Shape mismatch in the
# collective instance" (a second train() in a notebook would); multi-worker
# collectives can be configured only once.
_STRATEGIES = {}


def split_cpu(count):
    """Splits the first physical CPU into ``count`` logical devices (``CPU:0``...).

    With them, ``get_strategy("mirrored")`` on a machine without GPUs runs
    ``count`` synchronous replicas: a real all-reduce, for tests and for trying
    the distributed path (it proves correctness, not speed: the replicas share
    the same cores). Must run before TensorFlow initializes its devices, that is
    before the first op; raises RuntimeError otherwise.
    """
    if count < 1:
        raise ValueError(f"count must be a positive integer. Received: count={count}")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * count
    )
    return [device.name for device in tf.config.list_logical_devices("CPU")]


def _tpu_error(tpu, detail):
    where = f" at {tpu!r}" if tpu else ""
    return ValueError(
        f"strategy='tpu' but no TPU was found{where}: {detail}. "
        "On a Cloud TPU VM pass --tpu local; "
        "with a TPU node pass its name or grpc://HOST:8470 (--tpu, TrainConfig.tpu); "
        "without a TPU use --strategy auto."
    )


def _wait_for_address(address, timeout):
    host_port = split_address(address, what="The TPU's grpc:// address")
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(host_port, timeout=2.0).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)


def _tpu_strategy(tpu, timeout):
    address = tpu[len("grpc://") :] if tpu and tpu.startswith("grpc://") else None
    if address and not _wait_for_address(address, timeout):
        # TensorFlow would wait for it without a limit.
        raise _tpu_error(tpu, f"nothing answered at {address} within {timeout:g} s")
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (ValueError, tf.errors.OpError, RuntimeError) as error:
        message = getattr(error, "message", None) or str(error)
        raise _tpu_error(
            tpu, message.splitlines()[0] if message else type(error).__name__
        ) from None
    return tf.distribute.TPUStrategy(resolver)


def set_threads(threads):
    """TensorFlow's intra-op and inter-op pools at ``threads`` threads each.

    None leaves TensorFlow's choice. The pools are fixed when TensorFlow runs
    its first op: asked for later, the same value passes and another one is a
    RuntimeError naming ``threads``, the value the process has, and the
    environment variables that set it before TensorFlow starts.
    """
    if threads is None:
        return
    threading = tf.config.threading
    try:
        threading.set_intra_op_parallelism_threads(threads)
        threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pools = (
            threading.get_intra_op_parallelism_threads(),
            threading.get_inter_op_parallelism_threads(),
        )
        if pools != (threads, threads):
            raise RuntimeError(
                f"threads={threads} cannot take effect: TensorFlow has started "
                f"with (intra-op, inter-op) pools of {pools} threads (0: one per "
                "core). Set threads before any TensorFlow op runs, or "
                f"TF_NUM_INTRAOP_THREADS={threads} TF_NUM_INTEROP_THREADS="
                f"{threads} in the environment. Received: threads={threads}"
            ) from None


def get_strategy(name="auto", tpu=None, worker_timeout=120.0):
    """Returns the `tf.distribute.Strategy` called ``name``.

    * ``"auto"``: multi-worker when ``TF_CONFIG`` lists more than one task
      (chief and workers), mirrored when there are several GPUs, else the default.
    * ``"default"``: no distribution (one device).
    * ``"mirrored"``: synchronous data parallelism over the local GPUs (or, with
      none, the logical CPU devices: see `split_cpu`).
    * ``"multi_worker"``: synchronous data parallelism over the workers that
      ``TF_CONFIG`` describes, one process per machine, each with its GPUs (or
      CPU). Every worker first waits (at most ``worker_timeout`` seconds) until it
      reaches all the others, and fails naming the ones it could not reach
      (`keras_selfattn.training.distribute.distributed.PeerUnreachableError`).
    * ``"tpu"``: a TPU found by ``TPUClusterResolver``: ``tpu`` is ``"local"`` on a
      Cloud TPU VM, a TPU name, or ``grpc://HOST:8470``. Without one, a ValueError
      says so (no traceback from the command line).

    Create it before any other TensorFlow work (multi-worker collectives must be
    configured at program start-up), then build and compile the model inside
    ``strategy.scope()``. `train` does both. Asking again returns the same object.
    """
    if name not in STRATEGIES:
        raise ValueError(
            f"strategy must be one of {STRATEGIES}. Received: strategy={name!r}"
        )
    cluster = read_cluster() if name in ("auto", "multi_worker") else None
    if name == "auto":
        name = _automatic_choice(cluster)
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        return _mirrored_strategy()
    if name == "multi_worker":
        return _multi_worker_strategy(cluster, worker_timeout)
    key = ("tpu", tpu)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = _tpu_strategy(tpu, worker_timeout)
    return _STRATEGIES[key]


def _automatic_choice(cluster):
    """What ``"auto"`` means here: multi-worker, mirrored over GPUs, or default."""
    if cluster is not None:
        return "multi_worker"
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return "mirrored"
    return "default"


def _mirrored_strategy():
    """One `MirroredStrategy` per set of local devices (the GPUs, else the CPUs)."""
    gpus = tf.config.list_logical_devices("GPU")
    devices = tuple(d.name for d in gpus) or tuple(
        d.name for d in tf.config.list_logical_devices("CPU")
    )
    key = ("mirrored", devices)
    if key not in _STRATEGIES:
        _STRATEGIES[key] = tf.distribute.MirroredStrategy(list(devices))
    return _STRATEGIES[key]


def _multi_worker_strategy(cluster, worker_timeout):
    """The process's one `MultiWorkerMirroredStrategy`, once every peer answered."""
    if "multi_worker" in _STRATEGIES:  # collectives are configured once per process
        return _STRATEGIES["multi_worker"]
    if cluster is None:
        raise ValueError(
            "strategy='multi_worker' needs TF_CONFIG naming at least two tasks, e.g. "
            '{"cluster": {"worker": ["host1:12345", "host2:12345"]}, '
            '"task": {"type": "worker", "index": 0}}. '
            f"Received: TF_CONFIG={os.environ.get('TF_CONFIG', '')!r}"
        )
    wait_for_peers(cluster, timeout=worker_timeout)
    _STRATEGIES["multi_worker"] = tf.distribute.MultiWorkerMirroredStrategy()
    return _STRATEGIES["multi_worker"]
