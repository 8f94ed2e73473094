#!/usr/bin/env python3
"""tools/partner_model.py: its Hilbert keys are kfmm's (core/hilbert.hpp; the values below are
kfmm::hilbert_key of the same coordinates), every rank partners every other up to R = 8 (the
eight Hilbert octants meet at the cube's centre, as measured), and the README's table of the
model (R = 16 … 512).

  test_partner_model.py SOURCE_DIR"""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import numpy as np  # noqa: E402
import partner_model  # noqa: E402

KFMM_KEYS = [
    (1840766, 272351, 334892, 9133585549056082497),
    (694005, 2038922, 877307, 3937534216693836240),
    (1953560, 1748337, 1734486, 6617770381350786041),
    (340951, 836804, 1814445, 2030567455183855306),
    (2011874, 2045555, 1272112, 6389742052866516133),
]


def main():
    failures = []
    for x, y, z, key in KFMM_KEYS:
        got = int(partner_model.hilbert_keys(np.array([x]), np.array([y]), np.array([z]))[0])
        if got != key:
            failures.append(f"hilbert_keys({x}, {y}, {z}) = {got}, kfmm's key is {key}")
    for r in (2, 4, 8):
        m = partner_model.model(r, 0.75)
        if m["max"] != r - 1 or m["mean"] != r - 1:
            failures.append(f"R = {r}: partners {m['mean']} / {m['max']}, expected every other rank ({r - 1})")
    # The README's table (mean, max).
    for r, mean, most in ((16, 12.6, 14), (64, 26.6, 41), (128, 23.2, 40), (512, 40.0, 56)):
        m = partner_model.model(r, 0.75)
        if round(m["mean"], 1) != mean or m["max"] != most:
            failures.append(f"R = {r}: partners {m['mean']:.1f} / {m['max']}, the README has {mean} / {most}")
    # Boundaries moved by up to 5 % of a domain (the README's R = 128 row, seed 1).
    m = partner_model.model(128, 0.75, 0.05, 1)
    if round(m["mean"], 1) != 26.0 or m["max"] != 53:
        failures.append(f"R = 128, jitter 0.05: partners {m['mean']:.1f} / {m['max']}, the README has 26.0 / 53")
    # One more level of the top tree replicated (the README's R = 64 row).
    m = partner_model.model(64, 0.75, replicated_depth=1)
    if round(m["mean"], 1) != 14.6 or m["max"] != 26 or m["replicated"] != 512:
        failures.append(f"R = 64, replicated depth 1: partners {m['mean']:.1f} / {m['max']} over {m['replicated']} "
                        "cells, the README has 14.6 / 26 over 512")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("partner model: ok")


if __name__ == "__main__":
    main()
