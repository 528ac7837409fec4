"""A fingerprint of a run's data files, compared when a run resumes.

Each file is recorded by name, size and the SHA-256 of its first MiB: cheap on any
corpus size, and it catches another file, a file grown or shrunk, and a file
rewritten at its start.
"""

import hashlib

import tensorflow as tf

__all__ = ["describe_data_change", "file_fingerprint"]

_HEAD_BYTES = 1 << 20


def file_fingerprint(name):
    """``{"file", "bytes", "head_sha256"}`` of one file (read with ``tf.io.gfile``)."""
    with tf.io.gfile.GFile(name, "rb") as handle:
        head = handle.read(_HEAD_BYTES)
    return {
        "file": name,
        "bytes": tf.io.gfile.stat(name).length,
        "head_sha256": hashlib.sha256(head).hexdigest(),
    }


def describe_data_change(saved: dict, current: dict) -> str | None:
    """What differs between two data fingerprints, in words (None: the same data)."""
    for role in ("data", "valid_data", "test_data", "settings"):
        before, after = saved.get(role), current.get(role)
        if before == after:
            continue
        if role == "settings":
            return f"the data settings changed from {before} to {after}"
        if not before or not after or len(before) != len(after):
            names = [entry["file"] for entry in before or []]
            new_names = [entry["file"] for entry in after or []]
            return f"--{role.replace('_', '-')} changed from {names} to {new_names}"
        for old, new in zip(before, after, strict=True):
            if old != new:
                if old["file"] != new["file"]:
                    flag = role.replace("_", "-")
                    return f"--{flag} file {old['file']} became {new['file']}"
                return (
                    f"{new['file']} changed since the run started "
                    f"({old['bytes']} -> {new['bytes']} bytes)"
                )
    return None
