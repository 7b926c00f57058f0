"""The mechanism benchmark (`benchmarks/mechanism.py`), fast: on four tasks told apart only by the routing (two copy,
two reverse), head selection must solve every task, which the shared model cannot, and must share more heads
between tasks that agree than between tasks that conflict. Every task's logits start equal, so only the learned
selection (the straight-through gradient to the logits) separates the tasks."""

from __future__ import annotations

import pytest
import torch

import mechanism  # benchmarks/ is on the test path (`pythonpath` in setup.cfg)

SETTINGS = mechanism.MechanismSettings(steps=300, eval_size=64)
SEED = 2


@pytest.fixture(scope="module")
def trained():
    torch.manual_seed(SEED)
    return {name: mechanism.train(mechanism.build_model(SETTINGS, SEED, shared), SETTINGS, SEED, frozen)
            for name, shared, frozen in (("head_selection", False, False), ("frozen", False, True),
                                         ("shared", True, False))}


def test_the_problem_needs_the_routing(trained):
    # Inputs say nothing of the task: the shared model and untrained (identical) selections guess copy or reverse.
    for name in ("shared", "frozen"):
        accuracy = mechanism.accuracy_per_task(trained[name], SETTINGS, SEED)
        assert sum(accuracy.values()) / len(accuracy) < 0.5, (name, accuracy)
    overlap = mechanism.head_overlap(trained["frozen"])
    torch.testing.assert_close(overlap, torch.ones_like(overlap))


def test_head_selection_solves_every_task_and_shares_among_agreeing_tasks(trained):
    accuracy = mechanism.accuracy_per_task(trained["head_selection"], SETTINGS, SEED)
    assert min(accuracy.values()) >= 0.9, accuracy
    sharing = mechanism.agreement_summary(mechanism.head_overlap(trained["head_selection"]))
    assert sharing["agreeing"] > sharing["conflicting"], sharing


def test_every_task_starts_from_the_same_logits():
    model = mechanism.build_model(SETTINGS, SEED)
    for selector in model.head_selection.values():
        assert torch.equal(selector.logits, selector.logits[:1].expand_as(selector.logits))
