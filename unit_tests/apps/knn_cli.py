#!/usr/bin/python3
"""`kfmm knn` end to end: writes uniform particles with `kfmm ic`, runs `kfmm knn` on 1 and 3
ranks (open box, and periodic with the box taken from the file's BoxSize by --periodic) and
checks KNNIds and KNNDistance against brute force over all pairs (ties by the smaller id); the
3-rank output must equal the 1-rank output bit for bit. `--periodic` on a file without a
BoxSize must fail with an error naming BoxSize and --box."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import h5py
import numpy as np

N, K = 1200, 7


def run(command, expect_failure=False):
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if expect_failure != (result.returncode != 0):
        sys.exit(f"{' '.join(command)}: exit code {result.returncode}\n{result.stdout}")
    return result.stdout


def brute_force(x, ids, box):
    """(distances, ids) of the K nearest other particles of each particle, nearest first."""
    dx = x[:, None, :] - x[None, :, :]
    if box > 0:
        dx = np.abs(dx)
        dx = np.minimum(dx, box - dx)
    d2 = (dx * dx).sum(axis=2)
    np.fill_diagonal(d2, np.inf)
    order = np.lexsort((np.broadcast_to(ids, d2.shape), d2), axis=1)[:, :K]
    return np.sqrt(np.take_along_axis(d2, order, axis=1)), ids[order]


def check(path, source, box):
    with h5py.File(source, "r") as f:
        x = f["PartType1/Coordinates"][:].astype(np.float64)
        ids = f["PartType1/ParticleIDs"][:]
    with h5py.File(path, "r") as f:
        got_d = f["PartType1/KNNDistance"][:]
        got_ids = f["PartType1/KNNIds"][:]
        out_ids = f["PartType1/ParticleIDs"][:]
        parameters = dict(f["Parameters"].attrs) if "Parameters" in f else {}
    if not np.array_equal(out_ids, ids):
        sys.exit(f"{path}: the particles are not in the input's order")
    want_d, want_ids = brute_force(x, ids, box)
    if not np.array_equal(got_ids, want_ids):
        rows = np.nonzero((got_ids != want_ids).any(axis=1))[0]
        sys.exit(f"{path}: {len(rows)} rows differ from brute force, first {rows[0]}: {got_ids[rows[0]]} "
                 f"against {want_ids[rows[0]]}")
    error = np.max(np.abs(got_d - want_d) / want_d)
    if error > 1e-12:
        sys.exit(f"{path}: distances differ from brute force by up to {error:.3g} (relative)")
    if int(parameters.get("KNNNeighbours", -1)) != K:
        sys.exit(f"{path}: /Parameters KNNNeighbours = {parameters.get('KNNNeighbours')} instead of {K}")
    if box > 0 and "KNNBoxSize" not in parameters:
        sys.exit(f"{path}: /Parameters has no KNNBoxSize for a periodic search")
    return got_d, got_ids


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kfmm", required=True)
    parser.add_argument("--mpiexec", default="mpirun")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="kfmm_knn_cli_")
    try:
        plain = os.path.join(work, "uniform.hdf5")
        run([args.kfmm, "ic", "uniform", "--n", str(N), "--precision", "double", "--seed", "7", "-o", plain])
        boxed = os.path.join(work, "boxed.hdf5")
        shutil.copy(plain, boxed)
        with h5py.File(boxed, "r+") as f:  # the uniform particles fill [0, 1)^3
            f["Header"].attrs["BoxSize"] = 1.0
        for name, source, flags, box in [("open", plain, [], 0.0), ("periodic", boxed, ["--periodic"], 1.0)]:
            outputs = []
            for ranks in (1, 3):
                out = os.path.join(work, f"{name}_{ranks}.hdf5")
                command = [args.kfmm, "knn", source, "--k", str(K), "--file-precision", "double", "-o", out] + flags
                if ranks > 1:
                    command = [args.mpiexec, "--oversubscribe", "-np", str(ranks)] + command
                run(command)
                outputs.append(check(out, source, box))
            for a, b in zip(outputs[0], outputs[1]):
                if not np.array_equal(a, b):
                    sys.exit(f"{name}: the 3-rank output differs from the 1-rank output")
        message = run([args.kfmm, "knn", plain, "--k", str(K), "--periodic", "-o", os.path.join(work, "no.hdf5")],
                      expect_failure=True)
        if "BoxSize" not in message or "--box" not in message:
            sys.exit(f"--periodic without a BoxSize: the error does not name BoxSize and --box:\n{message}")
        print("kfmm knn: open and periodic (BoxSize) outputs equal brute force on 1 and 3 ranks")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
