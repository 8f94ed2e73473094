#!/usr/bin/env python3
"""Relative energy error against time from the diagnostics CSV of `kfmm run`, as a PNG.

    tools/plot_energy.py output/diagnostics.csv -o energy.png
"""
import argparse
import csv
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("diagnostics", help="diagnostics.csv written by kfmm run")
    parser.add_argument("-o", "--output", help="PNG file (default: the CSV name with .png)")
    args = parser.parse_args()

    time, error = [], []
    with open(args.diagnostics, newline="") as f:
        for row in csv.DictReader(f):
            time.append(float(row["time"]))
            error.append(float(row["energy_error"]))
    if not time:
        raise SystemExit(f"plot_energy: {args.diagnostics} has no rows")

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(time, error, lw=1)
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("time")
    ax.set_ylabel("(E − E₀) / |E₀|")
    ax.set_title(f"energy error: final {error[-1]:+.2e}, largest {max(error, key=abs):+.2e}")
    output = args.output or os.path.splitext(args.diagnostics)[0] + ".png"
    fig.savefig(output, dpi=120, bbox_inches="tight")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
