"""Choosing the tf.distribute strategy a run trains under."""

import json
import os

import tensorflow as tf

STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")


def get_strategy(name="auto", tpu=None):
    """Returns the `tf.distribute.Strategy` called ``name``.

    * ``"auto"``: multi-worker when ``TF_CONFIG`` lists more than one worker,
      mirrored over the GPUs when there are several, else the default strategy.
    * ``"default"``: no distribution (one device).
    * ``"mirrored"``: synchronous data parallelism over the local GPUs (or the
      logical CPU devices when there is no GPU).
    * ``"multi_worker"``: synchronous data parallelism over the workers that
      ``TF_CONFIG`` describes.
    * ``"tpu"``: a TPU found by ``tf.distribute.cluster_resolver.TPUClusterResolver``
      (``tpu``: its name or address; None for the local or Colab TPU).

    Build and compile the model inside ``strategy.scope()``.
    """
    if name not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}. Received: strategy={name!r}")
    if name == "auto":
        workers = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {}).get("worker", [])
        if len(workers) > 1:
            name = "multi_worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "mirrored":
        gpus = tf.config.list_logical_devices("GPU")
        devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
        return tf.distribute.MirroredStrategy(devices)
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
    return tf.distribute.TPUStrategy(resolver)
