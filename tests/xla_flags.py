"""XLA's CPU compiler set to compile fast, for the suite's processes.

The suite compiles many small programs once each (a tiny run's train step, the
searches under XLA, every eager op on a new shape under JAX), where compiling
costs more than running. These options change how fast XLA compiles, not what a
program computes; measured on the JAX rerun (jaxlib 0.10.2, 2 cores).
"""

FAST_COMPILE_FLAGS = (
    # Without the backend's optimization passes: about 0.7x the time.
    "--xla_backend_optimization_level=0",
    # The elemental emitters instead of the newer fusion emitters: about 0.6x the
    # time again (128 CPU-s instead of 210 with the flag above alone).
    "--xla_cpu_use_fusion_emitters=false",
)


def for_tensorflow(version):
    """The `FAST_COMPILE_FLAGS` that TensorFlow ``version`` ("2.21.0")'s XLA is
    known to take: XLA aborts on a flag it does not know, and the fusion
    emitters' flag is known from 2.21 (older versions get the first alone)."""
    major, minor = (int(part) for part in version.split(".")[:2])
    return FAST_COMPILE_FLAGS if (major, minor) >= (2, 21) else FAST_COMPILE_FLAGS[:1]
