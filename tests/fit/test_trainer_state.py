"""What the trainer leaves on the device: its state in variables between calls, and the
products it compiles."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from hyperscan.fit import Trainer, build_ensemble, trainer_settings


def _trainer(card) -> Trainer:
    model, specs, params = build_ensemble(card)
    return Trainer(model, trainer_settings(card, len(specs)), params)


def test_no_state_variable_is_of_a_type_a_gpu_keeps_on_the_host(make_card):
    # TensorFlow places int32 variables in host memory, which a loop compiled for a GPU
    # cannot update in place.
    trainer = _trainer(make_card(replicas=[1, 2], epochs=5))
    dtypes = {variable.dtype for variable in tf.nest.flatten(trainer.variables)}
    assert dtypes.isdisjoint({tf.int32, tf.bool})
    # The loop still sees its counters and flags in their own types.
    state = trainer.state
    assert state["status"].dtype == tf.int32


def test_the_state_carries_over_from_one_call_to_the_next(make_card):
    trainer = _trainer(make_card(replicas=[1, 2], epochs=50))
    first = trainer.advance(3)
    second = trainer.advance(4)
    assert (first.step, second.step) == (3, 7)
    assert np.array_equal(trainer.state["member_steps"].numpy(), [7, 7])
    assert not np.array_equal(first.chi2, second.chi2)


def test_every_product_of_the_compiled_loop_is_full_float32(make_card):
    # On a GPU, XLA runs float32 products at default precision in TensorFloat-32.
    trainer = _trainer(make_card(replicas=[1, 2], epochs=5, training={"precision": "float32"}))
    hlo = trainer.steps_function.experimental_get_compiler_ir(tf.constant(1))(stage="hlo")
    products = [line for line in hlo.splitlines() if " dot(" in line]
    assert products
    assert all("operand_precision={highest,highest}" in line for line in products)
