"""`train`'s first stages, without training: refused before anything is written."""

import pytest

from keras_selfattn.config import TrainConfig
from keras_selfattn.models import ModelConfig
from keras_selfattn.training.fit.train import train


@pytest.mark.parametrize("run_dir", ["gs://bucket/run", "s3://b/r"])
def test_a_remote_run_directory_is_refused_by_train(tmp_path, monkeypatch, run_dir):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="must be a local path.*" + run_dir):
        train([("a b", "c d")] * 8, run_dir, ModelConfig(), TrainConfig(), verbose=0)
    assert list(tmp_path.iterdir()) == []  # no local folder named "gs:"
