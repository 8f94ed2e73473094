#!/usr/bin/env python3
"""Projected density image of kfmm (GADGET-4 format 3) snapshots, written as a PNG.

Reads /PartType1/Coordinates and Masses from a single snapshot file or from every file of a
snapdir_NNN/ directory, bins the mass on a grid in the chosen projection and plots log10 of
the projected density. Several snapshots give one row of panels with a common view and colour
scale (centred on the median position of the first).

    tools/plot_snapshot.py output/snapshot_010.hdf5 -o clumps.png [--axis z] [--size 100]
    tools/plot_snapshot.py output/snapshot_00{0,2,4}.hdf5 -o evolution.png --size 120
    tools/plot_snapshot.py out/snapshot_004.hdf5 --axis zy --centre 0 0 0 --mark 0 0 0 --size 100

Several projection axes (--axis zy) give one panel per snapshot and axis. --centre fixes the view
centre (a host galaxy at the origin), --mark draws a cross there (label: --mark-label).
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
    parser.add_argument("snapshots", nargs="+", help="snapshot_NNN.hdf5 or snapdir_NNN/ (several: one panel each)")
    parser.add_argument("-o", "--output", help="PNG file (default: the first snapshot's name with .png)")
    parser.add_argument("--axis", default="z", help="projection axis, or several (zy: one panel each; default z)")
    parser.add_argument("--size", type=float, help="side of the square view (default: 98%% of the first snapshot's "
                        "particles)")
    parser.add_argument("--pixels", type=int, default=512, help="pixels per side (default 512)")
    parser.add_argument("--centre", type=float, nargs=3, metavar=("X", "Y", "Z"),
                        help="centre of the view (default: the first snapshot's median position)")
    parser.add_argument("--mark", type=float, nargs=3, metavar=("X", "Y", "Z"), help="draw a cross at this point")
    parser.add_argument("--mark-label", default="host centre", help="legend of --mark (default 'host centre')")
    args = parser.parse_args()
    if not args.axis or any(a not in "xyz" for a in args.axis):
        parser.error(f"--axis {args.axis!r}: give one or more of x, y, z (such as z or zy)")

    snapshots = [read(path) for path in args.snapshots]
    first = snapshots[0][0]
    centre = np.array(args.centre) if args.centre else np.median(first, axis=0)
    views = [[a for a in range(3) if a != "xyz".index(axis)] for axis in args.axis]
    if args.size:
        half = args.size / 2
    else:
        half = max(np.percentile(np.abs(first[:, axes] - centre[axes]), 98) for axes in views)
    pixel_area = (2 * half / args.pixels) ** 2
    panels = []  # (axes, edges, density, snapshot, path) per snapshot and projection
    for snapshot, path in zip(snapshots, args.snapshots):
        for axes in views:
            edges = [np.linspace(centre[a] - half, centre[a] + half, args.pixels + 1) for a in axes]
            x, m, _ = snapshot
            image, _, _ = np.histogram2d(x[:, axes[0]], x[:, axes[1]], bins=edges, weights=m)
            panels.append((axes, edges, image.T / pixel_area, snapshot, path))
    positive = np.concatenate([p[2][p[2] > 0] for p in panels])
    floor, top = (positive.min(), positive.max()) if positive.size else (1.0, 10.0)

    count = len(panels)
    fig, axs = plt.subplots(1, count, figsize=(4.6 * count + 1.2, 4.8), squeeze=False)
    for ax, (axes, edges, density, (x, _, time), path) in zip(axs[0], panels):
        shown = ax.imshow(np.log10(np.maximum(density, floor)), origin="lower", cmap="magma",
                          vmin=np.log10(floor), vmax=np.log10(top),
                          extent=[edges[0][0], edges[0][-1], edges[1][0], edges[1][-1]])
        if args.mark:
            ax.plot(args.mark[axes[0]], args.mark[axes[1]], "+", color="cyan", markersize=12, mew=1.5,
                    label=args.mark_label)
            ax.legend(loc="upper right", fontsize=8, framealpha=0.5)
        ax.set_xlabel("xyz"[axes[0]])
        ax.set_ylabel("xyz"[axes[1]])
        ax.set_title(f"{os.path.basename(os.path.normpath(path))}: t = {time:.4g}, N = {len(x)}", fontsize=10)
    fig.colorbar(shown, ax=list(axs[0]), label="log10 projected density", fraction=0.03 if count > 1 else 0.05)
    output = args.output or os.path.splitext(os.path.normpath(args.snapshots[0]))[0] + ".png"
    fig.savefig(output, dpi=110, bbox_inches="tight")
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
