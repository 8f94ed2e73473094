#!/usr/bin/env python3
"""Projected density image of a kfmm (GADGET-4 format 3) snapshot, written as a PNG.

Reads /PartType1/Coordinates and Masses from a single snapshot file or from every file of a
snapdir_NNN/ directory, bins the mass on a grid in the chosen projection and plots log10 of
the projected density.

    tools/plot_snapshot.py output/snapshot_010.hdf5 -o clumps.png [--axis z] [--size 100]
"""
import argparse
import glob
import os

import h5py
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the backend)
import numpy as np  # noqa: E402


def snapshot_files(path):
    if os.path.isdir(path):
        files = sorted(glob.glob(os.path.join(path, "*.hdf5")), key=lambda f: int(f.rsplit(".", 2)[-2]))
        if not files:
            raise SystemExit(f"plot_snapshot: no *.hdf5 files in {path}")
        return files
    return [path]


def read(path):
    positions, masses, time = [], [], 0.0
    for name in snapshot_files(path):
        with h5py.File(name, "r") as f:
            time = float(f["Header"].attrs["Time"])
            if "PartType1" not in f:
                continue
            group = f["PartType1"]
            x = np.asarray(group["Coordinates"], dtype=np.float64)
            positions.append(x)
            if "Masses" in group:
                masses.append(np.asarray(group["Masses"], dtype=np.float64))
            else:
                masses.append(np.full(len(x), float(f["Header"].attrs["MassTable"][1])))
    if not positions:
        raise SystemExit(f"plot_snapshot: {path} holds no particles")
    return np.concatenate(positions), np.concatenate(masses), time


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("snapshot", help="snapshot_NNN.hdf5 or snapdir_NNN/")
    parser.add_argument("-o", "--output", help="PNG file (default: the snapshot name with .png)")
    parser.add_argument("--axis", choices="xyz", default="z", help="projection axis (default z)")
    parser.add_argument("--size", type=float, help="side of the square image (default: 98%% of the particles)")
    parser.add_argument("--pixels", type=int, default=512, help="pixels per side (default 512)")
    args = parser.parse_args()

    x, m, time = read(args.snapshot)
    axes = [a for a in range(3) if a != "xyz".index(args.axis)]
    centre = np.median(x, axis=0)
    if args.size is None:
        half = np.percentile(np.abs(x[:, axes] - centre[axes]), 98)
    else:
        half = args.size / 2
    edges = [np.linspace(centre[a] - half, centre[a] + half, args.pixels + 1) for a in axes]
    image, _, _ = np.histogram2d(x[:, axes[0]], x[:, axes[1]], bins=edges, weights=m)
    pixel_area = (2 * half / args.pixels) ** 2
    density = image.T / pixel_area
    positive = density[density > 0]
    floor = positive.min() if positive.size else 1.0

    fig, ax = plt.subplots(figsize=(6, 5.2))
    shown = ax.imshow(np.log10(np.maximum(density, floor)), origin="lower", cmap="magma",
                      extent=[edges[0][0], edges[0][-1], edges[1][0], edges[1][-1]])
    fig.colorbar(shown, ax=ax, label="log10 projected density")
    ax.set_xlabel("xyz"[axes[0]])
    ax.set_ylabel("xyz"[axes[1]])
    ax.set_title(f"{os.path.basename(os.path.normpath(args.snapshot))}: t = {time:.4g}, N = {len(x)}")
    output = args.output or os.path.splitext(os.path.normpath(args.snapshot))[0] + ".png"
    fig.savefig(output, dpi=120, bbox_inches="tight")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
