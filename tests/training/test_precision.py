"""``mixed_precision="auto"``: bfloat16 where the device multiplies it natively.

`native_bfloat16` decides from the device (a TPU, the GPUs' compute capability,
the CPU's flags and what oneDNN may use); a run keeps ``"auto"`` in its
config.json and its model the policy it was built under; `load_translator`
(translate, evaluate, export) loads such a run in float32 unless asked otherwise.
"""

import json
import pathlib

import keras
import pytest

from keras_selfattn import text
from keras_selfattn.config.presets import preset_configs
from keras_selfattn.inference import load_translator
from keras_selfattn.run_directory.layout import CONFIG_FILE, MODEL_FILE
from keras_selfattn.training import TrainConfig, train
from keras_selfattn.training.fit import compiled_model
from keras_selfattn.training.fit.compiled_model import (
    native_bfloat16,
    training_policy,
)
from tests.training.mirrored_checks import MODEL as TINY

# /proc/cpuinfo as Linux writes it: one block a logical CPU, "flags : ..." in each.
AVX512_ONLY = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_vnni\n\n"
WITH_BF16 = "processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16\n\n"
WITH_AMX = "processor\t: 0\nflags\t\t: fpu avx2 amx_tile amx_bf16 amx_int8\n\n"
# "avx512_bf16" outside the flags line is not a flag
IN_ANOTHER_LINE = "model name\t: avx512_bf16 lookalike\nflags\t\t: fpu avx2\n"


@pytest.mark.parametrize(
    "cpuinfo, environ, expected",
    [
        (WITH_BF16, {}, True),
        (WITH_AMX, {}, True),
        (AVX512_ONLY, {}, False),
        (IN_ANOTHER_LINE, {}, False),
        ("", {}, False),
        # oneDNN off: Eigen's kernels emulate bfloat16 (measured 1.03x float32)
        (WITH_BF16, {"TF_ENABLE_ONEDNN_OPTS": "0"}, False),
        (WITH_BF16, {"TF_ENABLE_ONEDNN_OPTS": "False"}, False),
        (WITH_BF16, {"TF_ENABLE_ONEDNN_OPTS": "1"}, True),
        # oneDNN held below bfloat16 (measured 1.87x float32), or not
        (WITH_BF16, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI"}, False),
        (WITH_BF16, {"ONEDNN_MAX_CPU_ISA": "avx2"}, False),
        (WITH_BF16, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"}, True),
        (WITH_AMX, {"ONEDNN_MAX_CPU_ISA": "AVX512_CORE_AMX"}, True),
        (WITH_BF16, {"ONEDNN_MAX_CPU_ISA": "ALL"}, True),
        # a cap cannot add what the CPU lacks
        (AVX512_ONLY, {"ONEDNN_MAX_CPU_ISA": "ALL"}, False),
    ],
)
def test_a_cpu_has_native_bfloat16_when_its_flags_and_onednn_say_so(
    cpuinfo, environ, expected
):
    assert native_bfloat16(gpus=[], cpuinfo=cpuinfo, environ=environ) is expected


@pytest.mark.parametrize(
    "gpus, expected",
    [
        ([(8, 0)], True),
        ([(9, 0), (8, 6)], True),
        ([(7, 5)], False),  # Turing: float16 tensor cores, no bfloat16
        ([(8, 0), (7, 0)], False),  # every replica must have it
        ([None], False),  # capability unknown
    ],
)
def test_gpus_have_it_from_ampere_on_whatever_the_cpu(gpus, expected):
    assert native_bfloat16(gpus=gpus, cpuinfo=WITH_BF16, environ={}) is expected
    assert native_bfloat16(gpus=gpus, cpuinfo=AVX512_ONLY, environ={}) is expected


def test_a_tpu_has_it():
    assert native_bfloat16(tpu=True, gpus=[(7, 0)], cpuinfo="", environ={})


def test_this_machine_is_read_from_proc_cpuinfo():
    path = pathlib.Path("/proc/cpuinfo")
    if not path.is_file():
        pytest.skip("no /proc/cpuinfo")
    words = set(path.read_text().split())
    assert native_bfloat16(gpus=[], environ={}) == bool(
        words & {"avx512_bf16", "amx_bf16"}
    )


@pytest.mark.parametrize("native", [True, False])
def test_auto_resolves_and_explicit_policies_pass_through(monkeypatch, native):
    monkeypatch.setattr(compiled_model, "native_bfloat16", lambda tpu=False: native)
    auto = TrainConfig(mixed_precision="auto")
    assert training_policy(auto) == ("mixed_bfloat16" if native else "float32")
    for policy in ("float32", "mixed_float16", "mixed_bfloat16"):
        assert training_policy(TrainConfig(mixed_precision=policy)) == policy


def test_the_small_preset_chooses_and_the_default_stays_float32():
    assert preset_configs("small")[1].mixed_precision == "auto"
    assert TrainConfig().mixed_precision == "float32"
    with pytest.raises(ValueError, match="mixed_precision.*'automatic'"):
        TrainConfig(mixed_precision="automatic")


@pytest.mark.slow  # a whole run, however short: seconds of building and tracing
def test_an_auto_run_keeps_auto_and_its_model_the_chosen_policy(
    monkeypatch, tmp_path, capsys
):
    monkeypatch.setattr(compiled_model, "native_bfloat16", lambda tpu=False: True)
    trained_under = "mixed_bfloat16"  # the test holds on any machine
    config = TrainConfig(
        train_steps=2,  # a run under the chosen policy; its steps are not checked
        batch_size=16,
        warmup_steps=1,
        target_tokenizer="char",
        jit_compile=False,
        mixed_precision="auto",
        validation_translations=0,
        best_by="loss",
    )
    result = train(
        text.load_bundled_dates()[:120], tmp_path / "run", TINY, config, verbose=2
    )
    assert f"mixed precision: auto -> {trained_under}" in capsys.readouterr().out
    saved = json.loads((result.run_dir / CONFIG_FILE).read_text())
    assert saved["train"]["mixed_precision"] == "auto"  # resolved at each start
    model = keras.saving.load_model(result.run_dir / MODEL_FILE)
    assert model.layers_dtype_policy.name == trained_under
    assert keras.config.dtype_policy().name == "float32"  # the global one is back
    # loaded (translate, evaluate, export) in float32 unless asked otherwise
    loaded = load_translator(result.run_dir).model
    assert loaded.layers_dtype_policy.name == "float32"
    kept = load_translator(result.run_dir, dtype="mixed_bfloat16").model
    assert kept.layers_dtype_policy.name == "mixed_bfloat16"
