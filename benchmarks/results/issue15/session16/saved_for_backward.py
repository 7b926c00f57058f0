"""Memory a training forward pass keeps for its backward pass (the tensors autograd saves, parameters left out),
stock vs head selection, single-task and mixed-task batch (overhead.py's models and batches, every component
selecting). Deterministic: no timing. Run from the repository root:

    python benchmarks/results/issue15/session16/saved_for_backward.py [marian|speech_to_text]"""
import sys

import torch

sys.path.insert(0, "benchmarks")
import op_count  # noqa: E402
import overhead  # noqa: E402


def saved_mb(model, inputs: dict) -> float:
    model.train()
    saved = op_count.saved_bytes(model, lambda: model(**inputs).loss.backward())  # the helper this script had
    model.zero_grad(set_to_none=True)
    return saved / 2**20


def main(family: str = "marian") -> None:
    cfg = overhead.BenchConfig(family=family, components=overhead.COMPONENT_PRESETS["all"])
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    print(f"{overhead.model_summary(cfg)}; training batch {cfg.batch_size}")
    for mixed in (False, True):
        torch.manual_seed(31)
        inputs, routing = overhead.make_inputs(cfg, cfg.batch_size, mixed, device, labels=True)
        stock = saved_mb(models["stock"], inputs)
        headsel = saved_mb(models["headsel"], {**inputs, **routing})
        print(f"{'mixed' if mixed else 'single'}-task batch: saved for the backward pass, MB: stock {stock:.1f}, "
              f"head selection {headsel:.1f} ({headsel / stock:.3f}x)")


if __name__ == "__main__":
    main(*sys.argv[1:])
