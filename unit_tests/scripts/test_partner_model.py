#!/usr/bin/env python3
"""tools/partner_model.py: its Hilbert keys are kfmm's (core/hilbert.hpp; the values below are
kfmm::hilbert_key of the same coordinates), every rank partners every other up to R = 8 (the
eight Hilbert octants meet at the cube's centre, as measured), the README's tables of the
model (R = 16 … 512 under the angle criterion, the relative criterion's walk), the walk model
counting what the offset model counts under the angle test, and tools/uniform_cube.py's field of
the uniform cube against its limits.

  test_partner_model.py SOURCE_DIR"""
import os
import sys

sys.path.insert(0, os.path.join(sys.argv[1], "tools"))
import numpy as np  # noqa: E402
import partner_model  # noqa: E402
import uniform_cube  # noqa: E402

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
    # The walk model (level by level, candidates from the parent's opened sources) counts what
    # the offset model counts when only the angle test decides.
    for r in (16, 64, 128):
        a, w = partner_model.model(r, 0.75), partner_model.walk_model(r, 0.75)
        if (a["mean"], a["max"], a["asked_max"]) != (w["mean"], w["max"], w["asked_max"]):
            failures.append(f"R = {r}: the walk model gives {w['mean']:.2f} / {w['max']} partners, the offset "
                            f"model {a['mean']:.2f} / {a['max']}")
    # The relative criterion with an allowance so large that every error passes is the angle test.
    loose = partner_model.walk_model(128, 0.95, partner_model.Relative(1.28e6, tolerance=1.0))
    plain = partner_model.walk_model(128, 0.95)
    if (loose["mean"], loose["max"]) != (plain["mean"], plain["max"]):
        failures.append(f"R = 128, alpha = 1: {loose['mean']:.2f} / {loose['max']} partners, the angle test alone "
                        f"{plain['mean']:.2f} / {plain['max']}")
    # The README's relative rows (1e4 particles per rank, alpha 1e-5, p 7, theta 0.95, floor 4.5).
    for r, mean, most in ((128, 21.0, 50), (512, 32.5, 146), (1024, 20.8, 49)):
        m = partner_model.walk_model(r, 0.95, partner_model.Relative(1e4 * r))
        if round(m["mean"], 1) != mean or m["max"] != most:
            failures.append(f"R = {r}, relative: partners {m['mean']:.1f} / {m['max']}, the README has {mean} / {most}")
    # The uniform cube's field: (4 pi / 3) x near the centre (pointing to it), 1 / d^2 far away,
    # the same along every axis by symmetry.
    for axis in range(3):
        point = np.full(3, 0.5)
        point[axis] += 1e-3
        g = uniform_cube.field(point)[0]
        if abs(g[axis] + 4 * np.pi / 3 * 1e-3) > 1e-8 or np.abs(np.delete(g, axis)).max() > 1e-12:
            failures.append(f"field 1e-3 from the centre along axis {axis}: {g}, expected -(4 pi/3) 1e-3 along it")
        point[axis] = 0.5 + 20
        g = uniform_cube.field(point)[0]
        if abs(g[axis] * 20**2 + 1) > 1e-3:
            failures.append(f"field 20 from the centre along axis {axis}: {g[axis]}, expected about -1/400")
    # A uniform cube's moments of degree 1-3 vanish (inversion and cubic symmetry), the fourth does not.
    h = uniform_cube.multipole_power(4)
    if abs(h[0] - 1) > 1e-12 or max(h[1:4]) > 1e-6 or not 0.015 < h[4] < 0.025:
        failures.append(f"a uniform cube's multipole powers H_0..4 / (M s^n) = {h}, expected 1, 0, 0, 0, about 0.019")
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("partner model: ok")


if __name__ == "__main__":
    main()
