"""Regenerate the saved round instances in this directory (see README.md for what each one is).

Run from the repository root::

    python instances/make_instances.py                       # every instance listed in README.md
    python instances/make_instances.py paper                 # instances/paper_example.json only
    python instances/make_instances.py round --gpus 128 --trace multi --seed 0
    python instances/make_instances.py hetero --types k80:2,p100:2,v100:2 --trace multi --seed 0 --noise 0.05

Generated rounds come from :func:`synergy_opt.generate_round` (seeded, so a command always writes the same
file); the paper's example is built by hand from Table 1 of the paper (section 2.1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from synergy_opt import Cluster, Job, RoundInstance, builtin_profile, generate_round, save_instance
from synergy_opt.generate import type_counts
from synergy_opt.hetero import HeteroRound

HERE = Path(__file__).resolve().parent
# (gpus, trace, seed) of every generated instance kept in the repository.
GENERATED = [(gpus, trace, 0) for gpus in (16, 128, 512) for trace in ("single", "multi")]
# (servers per GPU type, trace, profile noise, seed) of every heterogeneous instance kept (type-free rounds).
HETERO = [("k80:2,p100:2,v100:2", "single", 0.0, 0), ("k80:2,p100:2,v100:2", "multi", 0.0, 0),
          ("k80:2,p100:2,v100:2", "multi", 0.05, 0), ("k80:16,p100:16,v100:16", "single", 0.0, 0)]


def paper_example() -> RoundInstance:
    """2 servers of 8 GPUs, 24 CPUs, 500 GB; four 4-GPU jobs: J1 ResNet18, J2 Audio-M5, J3 Transformer, J4 GNMT."""
    cluster = Cluster(servers=2, gpus_per_server=8, cpus_per_server=24, mem_gb_per_server=500)
    models = {"j1": "res18", "j2": "m5", "j3": "transformer", "j4": "gnmt"}
    jobs = tuple(Job(job_id, 4, builtin_profile(model), model=model) for job_id, model in models.items())
    metadata = {"generator": "instances/make_instances.py paper", "source": "Synergy OSDI'22, section 2.1, Table 1"}
    return RoundInstance(cluster, jobs, metadata)


def round_path(gpus: int, trace: str, seed: int) -> Path:
    return HERE / f"round_{gpus}gpu_{trace}_seed{seed}.json"


def round_instance(gpus: int, trace: str, seed: int) -> RoundInstance:
    return generate_round(gpus, split=(20, 70, 10), multi_gpu=trace == "multi", seed=seed)


def write_round(gpus: int, trace: str, seed: int) -> Path:
    return save_instance(round_instance(gpus, trace, seed), round_path(gpus, trace, seed))


def hetero_path(types: str, trace: str, noise: float, seed: int) -> Path:
    counts = type_counts("types", types)
    gpus = {8 * servers for servers in counts.values()}
    size = f"{len(counts)}x{gpus.pop()}gpu" if len(gpus) == 1 else "_".join(f"{k}{8 * n}" for k, n in counts.items())
    noisy = f"_noise{noise:g}" if noise else ""
    return HERE / f"hetero_{size}_{trace}{noisy}_seed{seed}.json"


def hetero_instance(types: str, trace: str, noise: float, seed: int) -> HeteroRound:
    return generate_round(split=(20, 70, 10), multi_gpu=trace == "multi", seed=seed, profile_noise=noise,
                          types=types)


def write_hetero(types: str, trace: str, noise: float, seed: int) -> Path:
    return save_instance(hetero_instance(types, trace, noise, seed), hetero_path(types, trace, noise, seed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what")
    sub.add_parser("paper", help="the paper's worked example")
    one = sub.add_parser("round", help="one generated full-load round (split 20/70/10)")
    one.add_argument("--gpus", type=int, required=True)
    one.add_argument("--trace", choices=("single", "multi"), required=True)
    one.add_argument("--seed", type=int, default=0)
    typed = sub.add_parser("hetero", help="one generated type-free heterogeneous round (split 20/70/10)")
    typed.add_argument("--types", required=True, help="servers per GPU type, e.g. k80:2,p100:2,v100:2")
    typed.add_argument("--trace", choices=("single", "multi"), required=True)
    typed.add_argument("--noise", type=float, default=0.0)
    typed.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    written = []
    if args.what in (None, "paper"):
        written.append(save_instance(paper_example(), HERE / "paper_example.json"))
    if args.what is None:
        written += [write_round(*key) for key in GENERATED]
        written += [write_hetero(*key) for key in HETERO]
    if args.what == "round":
        written.append(write_round(args.gpus, args.trace, args.seed))
    if args.what == "hetero":
        written.append(write_hetero(args.types, args.trace, args.noise, args.seed))
    for path in written:
        print(f"wrote {path.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
