"""Every public function, driven with bad arguments eagerly and under jit (the sweep is in
tests/core/badinputs.py): each outcome must be a TypeError / ValueError naming the function
(or a success, when the value happens to be valid there), never an error from NumPy or
Python internals and never one naming another op. The default run sweeps each function's
first argument with one non-array and one array-valued bad value (a few seconds); the
`slow` run sweeps every required argument with every bad value. Both print their counts."""
import pytest

import badinputs as B


def _report(tally):
    print("\n" + tally.summary())
    bad = tally.failures()
    lines = [f"{o.kind:9} {o.qual}({o.slot}={o.bad}, {o.mode}): {o.detail}" for o in bad[:40]]
    assert not bad, f"{len(bad)} bad outcomes ({tally.summary()}):\n" + "\n".join(lines)


def test_enumeration_covers_every_public_module():
    fs = B.public_functions()
    modules = {q.rsplit(".", 1)[0] if "." in q else "" for q, _, _ in fs}
    assert set(B.MODULES) | {""} <= modules
    names = {q for q, _, _ in fs}
    for must in ("numpy.add", "numpy.linalg.inv", "lax.cond", "nn.relu", "random.normal",
                 "optim.adam", "io.load", "io.save", "grad", "jit", "vmap"):
        assert must in names
    print(f"\n{len(fs)} public functions in {len(modules)} namespaces")


def test_bad_inputs_quick():
    bad = [b for b in B.bad_values() if b[0] in ("opaque", "rank6")]
    _report(B.sweep(B.public_functions(), bad=bad, only_first_slot=True, eager=False))


@pytest.mark.slow
def test_bad_inputs_full():
    _report(B.sweep(B.public_functions(), optional=True))


def test_transformed_functions_name_their_transform():
    _report(B.sweep_transformed())
