#!/usr/bin/python3
"""Times scipy's cKDTree k nearest neighbours (k + 1 with self, workers = 2) on the particles of
a kfmm/GADGET-4 file, to compare with `kfmm knn FILE --k K` on the same points; with --check
OUT.hdf5 (a `kfmm knn` output of FILE) it also compares every 50th row's ids and distances."""
import argparse
import time

import h5py
import numpy as np
from scipy.spatial import cKDTree

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("file")
parser.add_argument("k", type=int)
parser.add_argument("--workers", type=int, default=2)
parser.add_argument("--check", help="kfmm knn output of the same file")
args = parser.parse_args()
group = h5py.File(args.file, "r")["PartType1"]
x = group["Coordinates"][:].astype(np.float64)
t0 = time.perf_counter()
tree = cKDTree(x)
t1 = time.perf_counter()
d, i = tree.query(x, k=args.k + 1, workers=args.workers)
t2 = time.perf_counter()
print(f"scipy cKDTree: N = {len(x)}, k = {args.k}: build {t1 - t0:.3f} s, query {t2 - t1:.3f} s, total {t2 - t0:.3f} s")
if args.check:
    out = h5py.File(args.check, "r")["PartType1"]
    ids = group["ParticleIDs"][:]
    rows = np.arange(0, len(x), 50)
    same = (ids[i[rows, 1:]] == out["KNNIds"][:][rows]).mean()
    rel = np.max(np.abs(d[rows, 1:] - out["KNNDistance"][:][rows]) / np.maximum(d[rows, 1:], 1e-300))
    print(f"  {len(rows)} rows: ids equal {same:.6f}, largest relative distance difference {rel:.2e}")
