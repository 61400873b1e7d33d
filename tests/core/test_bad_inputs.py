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


# the cases the tracker listed, by name: class and the op named

def _x():
    import mirax.numpy as mnp
    return mnp.ones((1, 1, 4, 4))


@pytest.mark.parametrize("call, cls, name", [
    (lambda mx, mnp: mnp.add(mnp.ones(2), None), TypeError, "add"),
    (lambda mx, mnp: mnp.ones(2) + "a", TypeError, "add"),
    (lambda mx, mnp: mnp.sin([[1., 2.], [3.]]), TypeError, "sin"),
    (lambda mx, mnp: mnp.sign(True), TypeError, "sign"),
    (lambda mx, mnp: mnp.zeros((10 ** 6, 10 ** 6)), ValueError, "zeros"),
    (lambda mx, mnp: mnp.hypot(mnp.ones(2), mnp.ones(3)), ValueError, "hypot"),
    (lambda mx, mnp: mnp.logaddexp(mnp.ones(2), mnp.ones(3)), ValueError, "logaddexp"),
    (lambda mx, mnp: mx.nn.segment_sum(mnp.ones(2), mnp.array([0, 1, 2]), 3), ValueError,
     "segment_sum"),
    (lambda mx, mnp: mx.nn.segment_mean(mnp.ones(2), mnp.array([0, 1, 2]), 3), ValueError,
     "segment_mean"),
    (lambda mx, mnp: mx.random.normal(mx.random.key(0), (-1,)), ValueError, "normal"),
    (lambda mx, mnp: mx.nn.max_pool2d(_x(), 0), ValueError, "max_pool2d"),
    (lambda mx, mnp: mx.nn.avg_pool2d(_x(), 2, stride=0), ValueError, "avg_pool2d"),
    (lambda mx, mnp: mx.vmap(lambda a: a, chunk_size=0), ValueError, "vmap"),
    (lambda mx, mnp: mx.jacfwd(lambda a: a, chunk_size=0), ValueError, "jacfwd"),
    (lambda mx, mnp: mx.optim.adam(0.1).update({"w": mnp.ones(4)},
                                               mx.optim.adam(0.1).init({"w": mnp.ones(3)})),
     ValueError, "adam"),
    (lambda mx, mnp: mx.optim.adam("a"), TypeError, "adam"),
    (lambda mx, mnp: mx.grad(None), TypeError, "grad"),
], ids=["add-None", "add-str", "sin-ragged", "sign-bool", "zeros-huge", "hypot", "logaddexp",
        "segment_sum", "segment_mean", "normal-neg", "max_pool-k0", "avg_pool-s0",
        "vmap-chunk0", "jacfwd-chunk0", "adam-update", "adam-lr", "grad-None"])
def test_listed_errors_name_the_users_op(call, cls, name):
    import mirax as mx
    import mirax.numpy as mnp
    with pytest.raises(cls) as e:
        call(mx, mnp)
    assert B.names(str(e.value), name), str(e.value)
