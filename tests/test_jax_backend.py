"""What differs on JAX, again under KERAS_BACKEND=jax (keras.ops only).

Not every case twice: `ON_JAX` names the tests whose result depends on the
backend (the searches against their brute-force references, tests/test_decoding.py,
and the jitted searches' own tests, tests/test_decoding_jax.py; the layers'
numerics, masks, fused paths, symbolic shapes and their harness tests, which save
and read back a model; the accelerator benchmark's smoke run). They share one JAX
process.
"""

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

from tests.training.cluster import once_per_test_run
from tests.xla_flags import FAST_COMPILE_FLAGS

REPO = pathlib.Path(__file__).resolve().parents[1]

# What differs on JAX, test by test: the searches (jitted there), the layers'
# backend paths (their numerics against the references, masking, the fused
# attention, dropout's random bits, XLA, symbolic shapes, which JAX infers by
# tracing) and a model saved and read back (each layer's harness test: config,
# fit, .keras round trip, mixed precision, jit). Argument checks, docstrings and
# configs are Python that runs before any backend op: they run on TensorFlow
# only. A name listed here that no longer exists fails the run (pytest: "not
# found"), so a renamed test cannot drop out of the JAX run unnoticed.
ON_JAX = {
    # The harness (config, fit, .keras round trip, mixed precision, jit) once for
    # this layer on JAX; every score's numerics against the reference.
    "tests/layers/test_bahdanau_attention.py": (
        "test_harness_multi_head_additive",
        "test_matches_numpy_reference",
        "test_per_query_valid_lens_match_numpy",
        "test_multi_head_additive_matches_numpy_head_by_head",
        "test_valid_lens_equal_keys_mask_and_keras_mask",
        "test_fully_masked_row_gives_zeros_not_nan",
        "test_symbolic_shapes_with_t_different_from_s",
        "test_multi_head_single_query_in_a_graph_with_unknown_batch",
    ),
    "tests/layers/test_bahdanau_decoder.py": (
        "test_harness_decoder_rnmt_options",
        "test_rnmt_options_match_a_reference",
        "test_step_by_step_equals_full_sequence",
        "test_matches_numpy_reference_gru_two_layers",
        "test_keras_mask_of_memory_equals_memory_valid_lens",
        "test_seq2seq_model_with_masks_trains_under_xla_and_reloads",
        "test_fully_masked_memory_gives_finite_outputs_and_zero_weights",
        "test_symbolic_shapes_with_t_different_from_s",
    ),
    "tests/layers/test_bahdanau_decoder_cell.py": (
        "test_harness_cell",
        "test_keras_rnn_runs_the_cell_directly",
    ),
    "tests/layers/test_bahdanau_decoder_unroll.py": (
        "test_unrolled_equals_symbolic_loop",
        "test_gradients_agree_in_a_compiled_training_step",
    ),
    "tests/layers/test_dropout.py": (
        "test_bits_match_numpy",
        "test_masks_are_independent_across_calls_and_neighbours",
        "test_saved_and_loaded_with_the_keras_dropout_config",
    ),
    # Each public layer on keras.Inputs of unknown batch: fit, save, load.
    "tests/layers/test_functional_composition.py": (),
    "tests/layers/test_learned_positional_encoding.py": (
        "test_output_is_input_plus_table_rows",
        "test_only_rows_that_were_seen_get_gradients",
    ),
    "tests/layers/test_multi_head_self_attention.py": (
        "test_harness",
        "test_matches_numpy_reference",
        "test_matches_keras_multi_head_attention_with_copied_weights",
        "test_valid_lens_keras_mask_and_explicit_mask_agree",
        "test_fully_masked_rows_give_zeros_not_nan",
        "test_symbolic_scores_shape_with_unknown_length",
        "test_out_of_range_and_nan_lengths_have_a_defined_result",
        "test_fused_path_keeps_every_mask_semantic",
        "test_fused_mask_is_one_cudnn_takes_on_jax",
        "test_fused_path_matches_keras_multi_head_attention",
        "test_rotary_fused_path_matches_the_explicit_path",
    ),
    "tests/layers/test_positional_encoding.py": (
        "test_harness",
        "test_book_columns_6_to_9_for_60_positions_and_32_dims",
        "test_start_offset_matches_the_full_pass",
    ),
    "tests/layers/test_relative_attention.py": (
        "test_harness",
        "test_matches_numpy_reference_of_the_paper",
        "test_causal_mask_matches_reference_and_hides_the_future",
        "test_shifting_every_position_leaves_the_output_unchanged",
        "test_valid_lens_and_keras_mask_agree",
        "test_xla_and_attention_mask_match_eager",
    ),
    # The searches: every case but the argument checks.
    "tests/test_decoding.py": (
        "test_greedy_equals_a_python_loop_over_full_passes",
        "test_beam_search_finds_the_exhaustive_optimum",
        "test_beam_of_one_is_greedy_and_beams_are_sorted",
        "test_batching_and_extra_padding_do_not_change_results",
        "test_beam_search_applies_the_length_penalty_at_every_step",
        "test_sampling_is_one_more_strategy_of_the_same_loop",
        "test_a_beam_strategy_can_rank_candidates_its_own_way",
        "test_two_level_top_k_equals_a_sort_ties_included",
        "test_beam_search_over_a_large_vocabulary_equals_the_python_reference",
        "test_a_length_ratio_ends_each_sentence_as_max_len_at_its_cap_would",
        "test_no_length_ratio_or_one_that_never_binds_gives_today_s_results",
        "test_an_empty_batch_gives_empty_results_of_every_shape",
    ),
    # JAX-only: the jitted searches, and the accelerator benchmark's smoke run.
    "tests/test_decoding_jax.py": (),
    "tests/test_accelerator_benchmark.py": ("test_runs_on_jax_in_quick_mode",),
}


def jax_node_ids():
    """The node ids of `ON_JAX`: a whole file where it lists no names."""
    return [
        f"{path}::{name}" if name else path
        for path, names in ON_JAX.items()
        for name in names or ("",)
    ]


# Cases that repeat, on JAX, a property another case of the same test checks
# there; every case still runs under TensorFlow, and each test keeps a case here.
RERUN_ONCE_ON_JAX = (
    # top-k against a sort: kept, a size that fills its blocks (4096, k=1) and two
    # that need padding (600, k=4; 7919, k=8).
    *(
        f"tests/test_decoding.py::test_two_level_top_k_equals_a_sort_ties_included"
        f"[{k}-{size}]"
        for k, size in (
            (1, 600), (8, 600), (4, 4096), (8, 4096),
            (1, 7919), (4, 7919), (1, 8000), (8, 8000),
        )
    ),
    # Shift invariance: relative positions (clip 2) without the causal mask, and
    # rotary ones with it; a clip of 8 is the same code with another constant.
    *(
        "tests/layers/test_relative_attention.py::"
        f"test_shifting_every_position_leaves_the_output_unchanged[{case}]"
        for case in ("False-relative8", "True-relative8", "True-relative2",
                     "False-rotary")
    ),
    # Length ratios: greedy with attention is the static loop on TensorFlow, and
    # on JAX the jitted loop that greedy's and the beam's cases run there. The
    # caps binding (a dozen compiles of that loop, one a cap and batch): the
    # beam's case, whose hypotheses end at their sentence's cap in the same
    # loop state (`loop.capped`) as greedy's sentences.
    *(
        f"tests/test_decoding.py::{test}[greedy with attention]"
        for test in (
            "test_a_length_ratio_ends_each_sentence_as_max_len_at_its_cap_would",
            "test_no_length_ratio_or_one_that_never_binds_gives_today_s_results",
        )
    ),
    (
        "tests/test_decoding.py::"
        "test_a_length_ratio_ends_each_sentence_as_max_len_at_its_cap_would[greedy]"
    ),
    # The harness once per layer: the decoder's with the RNMT options (the other
    # decoder harness differs in cell and state options, Python above the
    # backend); multi-head self-attention with valid lengths (the masked path);
    # relative positions (rotary adds a rotation of the same ops).
    "tests/layers/test_multi_head_self_attention.py::test_harness[False]",
    "tests/layers/test_relative_attention.py::test_harness[rotary]",
    # The unrolled decoder against the loop: a GRU at inference and two LSTM
    # layers in training.
    *(
        "tests/layers/test_bahdanau_decoder_unroll.py::"
        f"test_unrolled_equals_symbolic_loop[{case}]"
        for case in ("False-kwargs1", "True-kwargs0")
    ),
)  # fmt: skip


def fast_compile_flags(env, tmp_path_factory):
    """`FAST_COMPILE_FLAGS` where this jaxlib's XLA knows them all, else the first
    (XLA aborts at start on a flag it does not know, and newer ones drop flags).
    Probed in a process of its own once per test run (a start of JAX, seconds):
    the JAX tests of every xdist worker read the answer."""

    def probe(_directory):
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                "import jax; jax.numpy.ones(2).sum().block_until_ready()",
            ],
            env={**env, "XLA_FLAGS": " ".join(FAST_COMPILE_FLAGS)},
            capture_output=True,
            check=False,
            timeout=300,
        )
        return list(
            FAST_COMPILE_FLAGS if done.returncode == 0 else FAST_COMPILE_FLAGS[:1]
        )

    return once_per_test_run(tmp_path_factory, "jax_fast_compile_flags", probe)


@pytest.mark.slow
@pytest.mark.jax
@pytest.mark.skipif(
    importlib.util.find_spec("jax") is None, reason="jax is not installed"
)
def test_layer_and_decoding_tests_pass_under_jax(tmp_path_factory):
    """The layer and decoding tests of `ON_JAX`, in one process (one start of JAX
    and TensorFlow, not one a file), less `RERUN_ONCE_ON_JAX`."""
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        PYTHONPATH=str(REPO),
        TF_CPP_MIN_LOG_LEVEL="3",
        JAX_PLATFORMS="cpu",
        # This test is the slow tier's: its cases are not held to the fast tier's
        # limit (a JAX trace costs more than TensorFlow's, a busy host more yet).
        KSA_FAST_TIER_SECONDS="inf",
    )
    env["XLA_FLAGS"] = " ".join(
        [env.get("XLA_FLAGS", ""), *fast_compile_flags(env, tmp_path_factory)]
    )
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            *jax_node_ids(),
            *(f"--deselect={node}" for node in RERUN_ONCE_ON_JAX),
        ],
        cwd=REPO,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and " failed" not in result.stdout
    # Every case left out exists (a renamed one would run again unnoticed).
    assert f"{len(RERUN_ONCE_ON_JAX)} deselected" in result.stdout, result.stdout[-500:]
    # The JAX-only tests ran: -ra (pyproject's addopts) would list them as skipped.
    assert "jitted searches" not in result.stdout
    assert "the accelerator benchmark under JAX" not in result.stdout
    assert "the mask cuDNN takes through JAX" not in result.stdout
