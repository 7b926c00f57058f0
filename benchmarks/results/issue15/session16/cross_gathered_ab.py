"""Mixed-task decoding with the decoder cross-attention layers projecting `"gathered"` (all candidates' q rows read
once) and the other layers `"auto"` (batched decoding steps), against `"auto"` everywhere: the stock model and both
variants timed by overhead.py's method (interleaved rounds, the order rotating), Marian, every component selecting,
one thread. Run from the repository root:

    python benchmarks/results/issue15/session16/cross_gathered_ab.py --repeats 30"""
import argparse
import sys

import torch

sys.path.insert(0, "benchmarks")
import overhead  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--measurement", default="generate greedy", choices=overhead.MEASUREMENTS)
    overhead.add_ab_arguments(parser, threads=1, repeats=30)
    args = parser.parse_args()
    cfg = overhead.ab_config(args)
    device = torch.device("cpu")
    models = overhead.build_models(cfg, device, torch.float32, ("stock", "headsel"))
    calls = overhead.measurement_calls(cfg, models, models, True, device)[args.measurement]
    cross = [m for m in models["headsel"].modules() if getattr(m, "component", None) == "decoder_cross"]

    def cross_gathered():
        for layer in cross:
            layer.mixed_batch_projection = "gathered"
        try:
            return calls["headsel"]()
        finally:
            for layer in cross:
                del layer.mixed_batch_projection

    systems = {"stock": calls["stock"], "auto": calls["headsel"], "cross_gathered": cross_gathered}
    measurement = overhead.Measurement(args.measurement, None, {system: [] for system in systems})
    overhead.run_measurement(measurement, systems, cfg, device)
    print(f"{overhead.model_summary(cfg)}; {args.measurement}, mixed-task; {args.threads} thread(s), "
          f"{cfg.repeats} interleaved rounds")
    print("\n".join(overhead.ratio_lines(measurement)))
    for system in ("auto", "cross_gathered"):
        print(overhead.paired(measurement.seconds, system, "stock"))
    print(overhead.paired(measurement.seconds, "cross_gathered", "auto"))


if __name__ == "__main__":
    main()
