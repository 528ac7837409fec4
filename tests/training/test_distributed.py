"""The workers of a multi-worker job: TF_CONFIG, the start-up rendezvous, the role."""

import json
import threading
import time

import pytest
import tensorflow as tf

from keras_selfattn.training.distribute.distributed import (
    PeerUnreachableError,
    read_cluster,
    split_address,
    wait_for_peers,
    worker_role,
)
from tests.training.cluster import free_ports


def _cluster(monkeypatch, addresses, index):
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {
                "cluster": {"worker": addresses},
                "task": {"type": "worker", "index": index},
            }
        ),
    )
    return read_cluster()


# --- TF_CONFIG ------------------------------------------------------------------

CONFIG = {
    "cluster": {"worker": ["h1:1", "h2:2"], "chief": ["h0:0"], "ps": ["p0:9"]},
    "task": {"type": "worker", "index": 1},
}


def test_tf_config_is_read_chief_first(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(CONFIG))
    cluster = read_cluster()
    # The same tasks, in the same order, as TensorFlow's own resolver sees them;
    # the parameter server does not train.
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    spec = resolver.cluster_spec().as_dict()
    assert [t[2] for t in cluster.tasks] == spec["chief"] + spec["worker"]
    assert [t[2] for t in cluster.tasks] == ["h0:0", "h1:1", "h2:2"]
    assert cluster.me == 2 and cluster.address == "h2:2" and len(cluster.peers) == 2
    assert (cluster.task_type, cluster.task_index) == ("worker", 1)


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        '{"cluster": {"worker": ["h1:1"]}, "task": {"type": "worker", "index": 0}}',
        '{"cluster": {"ps": ["p:1", "p:2"]}, "task": {"type": "ps", "index": 0}}',
        '{"task": {"type": "worker", "index": 0}}',
    ],
)
def test_fewer_than_two_training_tasks_is_no_cluster(monkeypatch, raw):
    monkeypatch.setenv("TF_CONFIG", raw)
    assert read_cluster() is None


def test_no_tf_config_is_no_cluster(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert read_cluster() is None


@pytest.mark.parametrize(
    "raw",
    [
        "{oops",
        '["h1:1", "h2:2"]',
        '{"cluster": ["h1:1", "h2:2"]}',
        (
            '{"cluster": {"worker": ["h1:1", "h2:2"]}, '
            '"task": {"type": "worker", "index": "one"}}'
        ),
    ],
)
def test_malformed_tf_config_is_a_clear_error(monkeypatch, raw):
    monkeypatch.setenv("TF_CONFIG", raw)
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON") as error:
        read_cluster()
    assert f"Received: TF_CONFIG={raw!r}" in str(error.value)


def test_a_task_outside_the_cluster_is_named(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({**CONFIG, "task": {"type": "worker", "index": 7}})
    )
    with pytest.raises(
        ValueError,
        match=r"task \{'type': 'worker', 'index': 7\} is not one of the cluster's "
        r"training tasks: \['chief:0', 'worker:0', 'worker:1'\]",
    ):
        read_cluster()
    monkeypatch.setenv("TF_CONFIG", json.dumps({**CONFIG, "task": {"type": "ps"}}))
    with pytest.raises(ValueError, match="'type': 'ps', 'index': None"):
        read_cluster()


def test_the_task_index_may_be_a_string(monkeypatch):
    """TensorFlow's resolver reads ``"index": "1"`` as 1; so does the cluster."""
    monkeypatch.setenv(
        "TF_CONFIG", json.dumps({**CONFIG, "task": {"type": "worker", "index": "1"}})
    )
    assert read_cluster().address == "h2:2"


def test_addresses():
    assert split_address("h1:12345") == ("h1", 12345)
    assert split_address("[::1]:80") == ("::1", 80)
    for bad in ("h1", "h1:", ":80", "h1:port"):
        with pytest.raises(ValueError, match=f"Received: {bad!r}"):
            split_address(bad)


def test_one_worker_is_the_chief(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    role = worker_role(tf.distribute.get_strategy())
    assert (role.index, role.count, role.is_chief) == (0, 1, True)


# --- the start-up rendezvous ----------------------------------------------------


def test_workers_meet_at_start_up(monkeypatch):
    addresses = [f"127.0.0.1:{port}" for port in free_ports(2)]
    first, second = (_cluster(monkeypatch, addresses, i) for i in (0, 1))
    errors = []

    def late_worker():
        time.sleep(1.0)  # starts a second after the first
        try:
            wait_for_peers(second, timeout=20)
        except Exception as error:  # noqa: BLE001  (reported below)
            errors.append(error)

    thread = threading.Thread(target=late_worker)
    thread.start()
    wait_for_peers(first, timeout=20)
    thread.join(30)
    assert not thread.is_alive() and not errors


def test_a_missing_peer_is_named_within_the_timeout(monkeypatch):
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    started = time.monotonic()
    with pytest.raises(
        PeerUnreachableError,
        match=rf"could not reach worker 1 at {addresses[1]}, worker 2 at ",
    ):
        wait_for_peers(_cluster(monkeypatch, addresses, 0), timeout=1.5)
    assert time.monotonic() - started < 10
