"""Real JAX programs (tests/corpus/programs), ported by their imports only, give JAX's
results under mirax. Each program runs twice from the same source text: with `mirax` and
with `jax` (see runner.py); their key outputs must agree.

Tolerances: the programs compute in float32 (mirax keeps NumPy float64 inputs in float64
where JAX's default mode narrows them, see the README), and a handful of training steps
amplify float32 rounding differences by at most a few hundred ulps; each program may set
RTOL / ATOL for its own conditioning (with its reason in a comment)."""
import pytest

from corpus_runner import check, names, run

FAST = {"vectorization", "sharp_bits"}


def _check(name):
    got, mod = run(name, "mirax")
    want, _ = run(name, "jax")
    assert want and got.keys() == want.keys(), (sorted(got), sorted(want))
    check(got, want, mod)   # every output within the program's RTOL / ATOL (asserts)


@pytest.mark.parametrize("name", sorted(FAST))
def test_program(name):
    _check(name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in names() if n not in FAST])
def test_program_slow(name):
    _check(name)
