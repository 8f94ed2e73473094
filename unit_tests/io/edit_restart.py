#!/usr/bin/env python3
"""Damages one kfmm restart file (rank_NNNN.h5) the way fuzz_tests/fuzz_restart found the reader
accepting or mishandling, for test_restart.cpp.

  edit_restart.py FILE EDIT      EDIT: one of EDITS below

Exit status 0 on success.
"""
import sys

import h5py
import numpy as np

EDITS = ["array_step", "next_output_2_32", "unwritten_positions", "nan_position", "num_total", "wrong_rank",
         "float_ids", "negative_step"]


def edit(path, what):
    with h5py.File(path, "r+") as f:
        a = f.attrs
        if what == "array_step":
            a.create("step", [7, 7, 7], dtype="i8")
        elif what == "next_output_2_32":
            a.create("next_output", 1 << 32, dtype="i8")
        elif what == "unwritten_positions":
            n = 1 << 40
            a.create("num", n, dtype="u8")
            for name in ("positions", "velocities"):
                del f[name]
                f.create_dataset(name, shape=(3, n), dtype="f8")  # shape only, no data
            for name, dtype in (("masses", "f8"), ("ids", "u8")):
                del f[name]
                f.create_dataset(name, shape=(n,), dtype=dtype)
        elif what == "nan_position":
            f["positions"][1, 0] = np.nan
        elif what == "num_total":
            a.create("num_total", int(a["num_total"]) + 1, dtype="u8")
        elif what == "wrong_rank":
            a.create("rank", 5, dtype="i8")
        elif what == "float_ids":
            ids = f["ids"][:].astype("f8") + 0.5
            del f["ids"]
            f.create_dataset("ids", data=ids)
        elif what == "negative_step":
            a.create("step", -1, dtype="i8")


def main(argv):
    if len(argv) == 2 and argv[1] in EDITS:
        edit(argv[0], argv[1])
        return 0
    print(__doc__, "edits:", ", ".join(EDITS))
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
