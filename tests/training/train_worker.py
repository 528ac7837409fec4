"""``keras-selfattn train`` without the evaluation and figures after it (resume tests).

``python tests/training/train_worker.py ARGS`` parses ARGS with the command's own
parser, calls `keras_selfattn.training.train` and prints the history; a user
error or a lost peer prints one line and exits with status 2, as the command does.
"""

import json
import sys

from keras_selfattn.cli import ModelConfig, build_parser
from keras_selfattn.cli.flags import config_from_args


def main(argv):
    from keras_selfattn.training import TrainConfig, train

    args = build_parser().parse_args(["train", *argv])
    try:
        result = train(
            args.data,
            args.out,
            config_from_args(ModelConfig, args),
            config_from_args(TrainConfig, args),
            verbose=2,
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
