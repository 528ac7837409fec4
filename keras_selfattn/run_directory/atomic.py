"""Writing a run's files atomically: a temporary file beside the target, renamed
onto it, so that a crash or a full disk leaves the old file or the new one, never
half of one."""

import os
import pathlib


def replace_atomically(write, path):
    """Runs ``write(tmp_path)``, then renames the file to ``path`` (atomically).

    A failed write leaves ``path`` as it was and removes the partial file; an
    `OSError` that names no file (h5py's and Keras' "No space left on device")
    is raised again naming ``path``.
    """
    path = pathlib.Path(path)
    tmp = path.with_name("tmp-" + path.name)
    try:
        write(tmp)
    except OSError as error:
        tmp.unlink(missing_ok=True)
        if error.filename is None and error.errno is not None:
            raise OSError(error.errno, os.strerror(error.errno), str(path)) from error
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
    return path


def write_text_atomically(path, text):
    """Writes ``text`` (UTF-8) to ``path`` by `replace_atomically`."""
    return replace_atomically(
        lambda tmp: pathlib.Path(tmp).write_text(text, encoding="utf-8"), path
    )
