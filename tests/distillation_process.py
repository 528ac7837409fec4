"""Runs ``translate_pairs(TEACHER, DATA, OUT, batch_size=N)`` in a process of its
own, as the command line will: a stopping signal ends it with the shell's
status for the signal (143 for SIGTERM). For tests/test_distillation.py's test
that kills a real process and resumes.

Run as ``python tests/distillation_process.py TEACHER DATA OUT BATCH_SIZE``.
"""

import sys

from keras_selfattn.distillation import translate_pairs
from keras_selfattn.stopping import Stopped


def main(teacher, data, out, batch_size):
    try:
        translate_pairs(teacher, data, out, batch_size=int(batch_size), verbose=False)
    except Stopped as stopped:
        return stopped.exit_status
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
