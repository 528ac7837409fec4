"""A truncated or corrupt ``.gz`` pair file is an error naming it, never less data.

The reference is Python's own `gzip` module, independent of the checker's
counting: ``gzip.decompress`` of the whole file, and `zlib.decompressobj` for
how many lines a cut file yields before its end.
"""

import gzip
import zlib

import pytest

from keras_selfattn.text import compressed, corpus, stream


def _text(count=3000):
    return "".join(
        f"source {i} words\ttarget {i} mots\n" for i in range(count)
    ).encode()


def _lines_before_cut(data):
    """Lines (whole and partial) zlib gives back from a truncated gzip stream."""
    out = zlib.decompressobj(wbits=31).decompress(data)
    return out.count(b"\n"), not out.endswith(b"\n")


@pytest.fixture
def whole(tmp_path):
    path = tmp_path / "pairs.tsv.gz"
    path.write_bytes(gzip.compress(_text(), mtime=0))
    return path


def test_a_whole_file_passes_and_streams_every_line(whole):
    assert stream.resolve_data_files(str(whole)) == [str(whole)]
    assert len(list(stream.pair_stream([str(whole)]).as_numpy_iterator())) == 3000
    # A multi-member file (cat a.gz b.gz) is whole too.
    double = whole.with_name("double.tsv.gz")
    double.write_bytes(whole.read_bytes() * 2)
    stream.resolve_data_files(str(double))
    assert gzip.decompress(double.read_bytes()).count(b"\n") == 6000


@pytest.mark.parametrize("keep", [0.02, 0.5, 0.9, 0.999, -4, -8])
def test_a_cut_file_names_itself_and_how_far_it_was_read(whole, keep):
    data = whole.read_bytes()
    cut_at = int(len(data) * keep) if keep > 0 else len(data) + keep
    cut = whole.with_name(f"cut-{keep}.tsv.gz")
    cut.write_bytes(data[:cut_at])
    with pytest.raises(EOFError):
        gzip.decompress(cut.read_bytes())  # the reference agrees the file is cut
    lines, partial = _lines_before_cut(data[:cut_at])
    with pytest.raises(compressed.CompressedFileError) as raised:
        stream.resolve_data_files(str(whole.parent / "cut-*.gz"))
    message = str(raised.value)
    assert message.startswith(f"{cut}: the gzip file is truncated")
    assert (
        f"after {lines:,} lines{' and part of a line' if partial else ''} (" in message
    )
    assert f"all {cut_at:,} bytes" in message
    # The in-memory reader (evaluate --data) says so too.
    with pytest.raises(ValueError, match="truncated or corrupt"):
        corpus.read_pairs(cut)


@pytest.mark.parametrize("where", ["crc", "length", "deflate", "not gzip"])
def test_a_corrupt_file_names_itself(whole, where):
    data = bytearray(whole.read_bytes())
    if where == "crc":
        data[-8] ^= 0xFF  # the CRC32 of the trailer
    elif where == "length":
        data[-1] ^= 0xFF  # the ISIZE of the trailer
    elif where == "deflate":
        data[len(data) // 2] ^= 0xFF
    else:
        data[:2] = b"PK"
    bad = whole.with_name("bad.tsv.gz")
    bad.write_bytes(bytes(data))
    with pytest.raises(Exception):  # noqa: B017  (the reference: gzip refuses it too)
        gzip.decompress(bytes(data))
    with pytest.raises(compressed.CompressedFileError) as raised:
        stream.resolve_data_files([str(whole), str(bad)])
    assert str(raised.value).startswith(f"{bad}: the gzip file is corrupt (")
    assert "within compressed bytes 0-" in str(raised.value)


def test_only_gz_names_are_checked_and_a_good_file_once(whole, tmp_path, monkeypatch):
    plain = tmp_path / "pairs.tsv"
    plain.write_bytes(whole.read_bytes()[:50])  # not gzip, not named so: not checked
    stream.resolve_data_files(str(plain))
    upper = tmp_path / "PAIRS.TSV.GZ"
    upper.write_bytes(whole.read_bytes()[:50])
    with pytest.raises(compressed.CompressedFileError):
        stream.resolve_data_files(str(upper))
    opened = []
    real = compressed.zlib.decompressobj
    monkeypatch.setattr(
        compressed.zlib, "decompressobj", lambda **kw: opened.append(1) or real(**kw)
    )
    stream.resolve_data_files(str(whole))
    stream.resolve_data_files(str(whole))
    assert len(opened) == 1  # checked once in this process
