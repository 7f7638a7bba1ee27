"""The tests' small fit runcard (fit/, pdfset/): a module of its own, so that a test can import
it by a name no other test folder has (``conftest`` is every folder's)."""

from __future__ import annotations

from hyperscan.runcard import runcard_from_dict


def tiny_card(**overrides):
    """A float64 fit on the tiny closure problem that trains in seconds."""
    card = {
        "data": {"closure": {"size": "tiny", "level": 1, "seed": 3}, "training_fraction": 0.75},
        "replicas": [1, 2, 3],
        "architecture": {"nodes": [10, 8], "activations": ["tanh", "tanh"]},
        "optimizer": {"name": "nadam", "learning_rate": 0.02, "clipnorm": 0.5},
        "epochs": 400,
        "stopping": {"patience": 0.1, "threshold_chi2": 50.0},
        "positivity": {"initial": 10.0, "max": 1000.0},
        "training": {"steps_per_call": 50, "precision": "float64"},
    }
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(card.get(key), dict):
            card[key] = {**card[key], **value}
        else:
            card[key] = value
    return runcard_from_dict(card)
