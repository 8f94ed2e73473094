#!/usr/bin/env python3
"""Communication per rank and per force evaluation at a fixed number of particles per rank
(weak scaling), counted rather than timed, so that oversubscribed ranks on a small machine give
the figures of a cluster (README, "Distributed"):

  mpicc -shared -fPIC -O2 -o /tmp/libmpi_calls.so tools/mpi_calls.c
  tools/weak_scaling.py --kfmm build/apps/kfmm --preload /tmp/libmpi_calls.so \
      --ranks 2 4 8 16 --per-rank 100000 --ic clumps uniform

For each (distribution, R) it runs `kfmm bench --n R*per_rank --json` twice, with --repeat A and
--repeat B, under tools/mpi_calls.c, and divides the differences of the counts by B - A: what
one more evaluation costs. Per rank: collectives, messages sent (point to point), partners (the
destinations whose message count grew between the two runs), bytes sent point to point and in
gathers; the host<->device bytes of the last evaluation come from `kfmm bench` (counted by the
library on every backend: what a GPU build without GPU-aware MPI copies). `--run` measures
steps of `kfmm run` instead (--repeat becomes the number of steps). Prints one Markdown row per
(distribution, R); each mpirun's stderr goes to --log. With MPI_CALLS_TRACE set (tools/mpi_calls.c)
the second run's calls are traced for tools/trace_partners.py.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"mpi_calls rank (\d+): (.*)")


def parse_calls(stderr):
    ranks = {}
    for line in stderr.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        fields = {}
        for item in m.group(2).split():
            key, _, value = item.partition("=")
            if key == "to":
                fields[key] = {int(d): int(c) for d, _, c in (p.partition(":") for p in value.split(",") if p)}
            else:
                fields[key] = int(value)
        ranks[int(m.group(1))] = fields
    return ranks


def run(args, ranks, n, ic, repeat, log):
    env = dict(os.environ, OMP_NUM_THREADS="1", OMP_PROC_BIND="false")
    mpirun = ["nice", "-n", "19", "mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none",
              "-np", str(ranks), "-x", "LD_PRELOAD=" + args.preload, "-x", "OMP_NUM_THREADS", "-x", "OMP_PROC_BIND"]
    for name in ("LD_LIBRARY_PATH", "MPI_CALLS_TRACE"):  # a copied libkfmm.so; tools/trace_partners.py
        if name in env:
            mpirun += ["-x", name]
    with tempfile.TemporaryDirectory() as work:
        if args.run:
            run_file = os.path.join(work, "run.yaml")
            with open(run_file, "w") as f:
                f.write("ic: {{kind: {}, n: {}}}\ntime: {{end: 0.01, outputs: 1, steps_per_output: {}}}\n"
                        "output: {{directory: {}, snapshots: false, diagnostics: \"\"}}\n".format(
                            ic, n, repeat, os.path.join(work, "out")))
            command = mpirun + [args.kfmm, "run", run_file]
        else:
            command = mpirun + [args.kfmm, "bench", "--ic", ic, "--n", str(n), "--repeat", str(repeat), "--samples",
                                str(args.samples), "--json"] + args.bench_args.split()
        done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=work)
    log.write("$ {}\n{}\n{}\n".format(" ".join(command), done.stdout, done.stderr))
    log.flush()
    if done.returncode != 0:
        sys.exit("failed ({}): {}\n{}".format(done.returncode, " ".join(command), done.stderr[-2000:]))
    bench = None
    if not args.run:
        bench = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    return parse_calls(done.stderr), bench


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kfmm", default="build/apps/kfmm")
    parser.add_argument("--preload", default="/tmp/libmpi_calls.so")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--per-rank", type=int, default=100000)
    parser.add_argument("--ic", nargs="+", default=["clumps", "uniform"])
    parser.add_argument("--repeat", type=int, nargs=2, default=[1, 3], metavar=("A", "B"))
    parser.add_argument("--samples", type=int, default=100, help="accuracy targets of kfmm bench")
    parser.add_argument("--run", action="store_true", help="count steps of kfmm run instead of evaluations")
    parser.add_argument("--bench-args", default="", help="more arguments of kfmm bench, e.g. \"--mac angle --theta 0.6\"")
    parser.add_argument("--most-connected", type=int, default=0, metavar="M",
                        help="also print the M ranks with the most partners (rank:partners)")
    parser.add_argument("--log", default="weak_scaling.log")
    args = parser.parse_args()
    args.kfmm = os.path.abspath(args.kfmm)
    a, b = args.repeat
    per = "step" if args.run else "evaluation"
    print("| IC | R | N | collectives | messages (mean / max) | partners (mean / max) | sent p2p (mean / max) | "
          "gathered | host<->device (max) | imported particles (max) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with open(args.log, "a") as log:
        for ic in args.ic:
            for ranks in args.ranks:
                n = ranks * args.per_rank
                first, _ = run(args, ranks, n, ic, a, log)
                second, bench = run(args, ranks, n, ic, b, log)
                rows = []
                for r in sorted(second):
                    x, y = first[r], second[r]
                    grown = [d for d, c in y.get("to", {}).items() if c > x.get("to", {}).get(d, 0)]
                    rows.append({"collectives": (y["collectives"] - x["collectives"]) / (b - a),
                                 "messages": (y["messages"] - x["messages"]) / (b - a),
                                 "partners": len(grown),
                                 "bytes": (y["bytes"] - x["bytes"]) / (b - a),
                                 "gathered": (y["collective_bytes"] - x["collective_bytes"]) / (b - a)})

                def mean(key):
                    return sum(row[key] for row in rows) / len(rows)

                def most(key):
                    return max(row[key] for row in rows)

                hd = "{:.2f} MB".format(bench["host_device_bytes_max"] / 1e6) if bench else "—"
                imported = "{}".format(bench["imported_particles_max"]) if bench else "—"
                print("| {} | {} | {:.1e} | {:.0f} | {:.0f} / {:.0f} | {:.1f} / {} | {:.2f} / {:.2f} MB | {:.0f} kB | {} | {} |"
                      .format(ic, ranks, n, most("collectives"), mean("messages"), most("messages"), mean("partners"),
                              most("partners"), mean("bytes") / 1e6, most("bytes") / 1e6, most("gathered") / 1e3, hd,
                              imported), flush=True)
                if args.most_connected > 0:
                    ranked = sorted(range(len(rows)), key=lambda r: -rows[r]["partners"])[:args.most_connected]
                    median = sorted(row["partners"] for row in rows)[len(rows) // 2]
                    print("<!-- {} R={}: most connected {}; median {} -->".format(
                        ic, ranks, " ".join("{}:{}".format(r, rows[r]["partners"]) for r in ranked), median), flush=True)


if __name__ == "__main__":
    main()
