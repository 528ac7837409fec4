"""``keras-selfattn train`` without the evaluation and figures after it (resume tests).

``python tests/training/train_worker.py ARGS`` parses ARGS with the command's own
parser, calls `keras_selfattn.training.train` and prints the history; a user
error or a lost peer prints one line and exits with status 2, as the command does.

With ``KILLED_IN_PERIOD=N`` in its environment the process SIGKILLs itself after
the first step of period N (counted from 0): once the backup of period N - 1 is
written, mid-training, at the same step on every run (a test that killed it from
outside would land anywhere after the backup).
"""

import json
import os
import signal
import sys

from keras_selfattn.cli import ModelConfig, build_parser
from keras_selfattn.cli.flags import config_from_args

KILLED_IN_PERIOD = "KILLED_IN_PERIOD"


def _killed_in_period(period):
    import keras

    class KilledInPeriod(keras.callbacks.Callback):
        """SIGKILL after the first step of ``period`` (after every backup callback:
        `train` runs its own callbacks first)."""

        def on_epoch_begin(self, epoch, logs=None):
            self.epoch = epoch

        def on_train_batch_end(self, batch, logs=None):
            if self.epoch == period:
                os.kill(os.getpid(), signal.SIGKILL)

    return KilledInPeriod()


def main(argv):
    from keras_selfattn.training import TrainConfig, train

    args = build_parser().parse_args(["train", *argv])
    killed_in = os.environ.get(KILLED_IN_PERIOD)
    callbacks = [_killed_in_period(int(killed_in))] if killed_in else []
    try:
        result = train(
            args.data,
            args.out,
            config_from_args(ModelConfig, args),
            config_from_args(TrainConfig, args),
            verbose=2,
            callbacks=callbacks,
        )
    except (ValueError, FileNotFoundError, ConnectionError) as error:
        print(f"keras-selfattn: error: {error}", file=sys.stderr)
        return 2
    print(
        f"worker {result.worker_index} done; history: {json.dumps(result.history)}",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
