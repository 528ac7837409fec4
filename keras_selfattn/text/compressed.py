"""Compressed pair files checked whole before use: a cut or corrupt ``.gz`` is an error.

TensorFlow's gzip reader (``tf.data.TextLineDataset(compression_type="GZIP")``,
its C++ ``ZlibInputStream``) stops *without an error* where a truncated file
ends: measured with TF 2.21, a file cut at 10%, 50%, 90% or 99.9% of its bytes,
or missing only its 8-byte trailer, reads as fewer lines and nothing else, so a
run trains on part of the corpus and says nothing. A wrong CRC (or corrupt
deflate data) does raise, but as ``DataLossError: inflate() failed with error
-3: incorrect data check``, naming no file, and only once the stream reaches it.

`check_compressed_file` therefore decompresses a ``.gz`` file once, before the
stream is built: `zlib` (gzip framing, CRC and length checked) over
``tf.io.gfile`` (so ``gs://`` too), in 1 MiB chunks (bounded memory).
A truncated or corrupt file raises `CompressedFileError` naming the file and how
far it was read (lines and bytes decompressed, compressed bytes consumed). A
file checked once in a process (same name, size and modification time) is not
checked again. ``skip_malformed`` does not apply: a file is not a line.
"""

import re
import zlib

import tensorflow as tf

__all__ = ["CompressedFileError", "check_compressed_file", "is_gzip_name"]

_GZIP_NAME = re.compile(r".*\.[gG][zZ]")  # what the stream reads as GZIP
_CHUNK = 1 << 20
_checked = set()


class CompressedFileError(ValueError):
    """A compressed data file is truncated or corrupt (the message names it)."""


def is_gzip_name(name) -> bool:
    """Whether the stream reads ``name`` as gzip (it ends in ``.gz``, any case)."""
    return bool(_GZIP_NAME.fullmatch(str(name)))


def check_compressed_file(name: str) -> None:
    """Decompresses ``name`` once if it is a ``.gz`` file; raises if cut or corrupt.

    Other files are left alone. Multi-member gzip files (``cat a.gz b.gz``) are
    whole files.

    Raises:
        CompressedFileError: the gzip data ends before its end marker (a
            truncated file), fails its CRC or length check, or is not gzip data;
            the message names the file and how far it was read.
    """
    name = str(name)
    if not is_gzip_name(name):
        return
    stat = tf.io.gfile.stat(name)
    key = (name, stat.length, stat.mtime_nsec)
    if key in _checked:
        return
    lines = decompressed = consumed = 0
    tail = b"\n"
    inflate = zlib.decompressobj(wbits=31)  # gzip framing, CRC and length checked
    with tf.io.gfile.GFile(name, "rb") as handle:
        try:
            while chunk := handle.read(_CHUNK):
                consumed += len(chunk)
                while chunk:
                    if inflate.eof:  # the next member of a multi-member file
                        chunk = chunk.lstrip(b"\0")  # zero padding, as gzip allows
                        if not chunk:
                            break
                        inflate = zlib.decompressobj(wbits=31)
                    out = inflate.decompress(chunk)
                    lines += out.count(b"\n")
                    decompressed += len(out)
                    tail = out[-1:] or tail
                    chunk = inflate.unused_data if inflate.eof else b""
        except zlib.error as error:
            raise CompressedFileError(
                f"{name}: the gzip file is corrupt ({error}) within compressed bytes "
                f"{consumed - _CHUNK if consumed > _CHUNK else 0:,}-{consumed:,} of "
                f"{stat.length:,}, after {lines:,} lines ({decompressed:,} bytes) "
                "decompressed; nothing of it was used, replace the file (check "
                "with: gzip -t FILE)"
            ) from None
    if not inflate.eof:
        partial = " and part of a line" if tail != b"\n" else ""
        raise CompressedFileError(
            f"{name}: the gzip file is truncated: its data ends before the end of "
            f"the compressed stream, after {lines:,} lines{partial} "
            f"({decompressed:,} bytes) decompressed from all {stat.length:,} bytes "
            "of the file (a copy or download cut short?); nothing of it was used, "
            "replace the file (check with: gzip -t FILE)"
        )
    _checked.add(key)
