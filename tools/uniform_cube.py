#!/usr/bin/env python3
"""The gravity of uniform particles in the unit cube, as tools/partner_model.py needs it for the
relative criterion (G = 1, total mass 1):

- field(points): the smooth field of the uniform cube (closed form of a rectangular prism);
- multipole_power(order), power_radius(q): a uniform cell's harmonic multipole powers H_n and
  its q-th power radius, in units of its mass and side (fmm/multipole_power.hpp defines them);
- smallest_field(n, seed): the smallest |a| of the particles around the cube's centre, per octant,
  by direct summation over n random particles (Plummer ε = 1e-3, kfmm's default): where the
  smooth field vanishes the particles' own graininess sets the smallest |a|, of the order of
  G m / l² with l = n^(-1/3) the interparticle spacing.

  uniform_cube.py [--n 1280000 ...] [--seeds 1 2 3]   (prints |a|_min · n^(1/3) per octant)
"""
import argparse
import math

import numpy as np


def field(points):
    """Gravitational acceleration (pointing to the mass) of the uniform unit cube [0, 1]³ of
    mass 1 at points (k × 3) inside or outside it: the prism's closed form summed over its eight
    corners, each component's antiderivative of x / r³ over the three coordinates."""
    p = np.atleast_2d(np.asarray(points, dtype=float))
    out = np.zeros_like(p)
    for axis in range(3):
        u_axis, v_axis, w_axis = axis, (axis + 1) % 3, (axis + 2) % 3
        total = np.zeros(len(p))
        for cu in (0, 1):
            for cv in (0, 1):
                for cw in (0, 1):
                    sign = (-1) ** (3 - cu - cv - cw)
                    u = cu - p[:, u_axis]
                    v = cv - p[:, v_axis]
                    w = cw - p[:, w_axis]
                    r = np.sqrt(u * u + v * v + w * w)
                    # d³F/du dv dw = u / r³
                    with np.errstate(divide="ignore", invalid="ignore"):
                        f = -(v * np.log(w + r) + w * np.log(v + r)) + u * np.arctan(v * w / (u * r))
                    total += sign * f
        out[:, axis] = total
    return out


def _cell_points(grid):
    g = (np.arange(grid) + 0.5) / grid - 0.5
    x, y, z = np.meshgrid(g, g, g, indexing="ij")
    return np.stack([x.ravel(), y.ravel(), z.ravel()], axis=1)


def multipole_power(order, grid=14):
    """H_n / (M s^n), n = 0 … order, of a uniform cube of side s about its centre:
    H_n² = Σ_jk m_j m_k |x_j|^n |x_k|^n P_n(cos ∠(x_j, x_k)), by the midpoint rule on grid³ points."""
    x = _cell_points(grid)
    m = 1.0 / len(x)
    r = np.linalg.norm(x, axis=1)
    unit = x / r[:, None]
    cos = np.clip(unit @ unit.T, -1.0, 1.0)
    powers = []
    for n in range(order + 1):
        coeff = np.zeros(n + 1)
        coeff[n] = 1
        legendre = np.polynomial.legendre.legval(cos, coeff)
        w = m * r**n
        powers.append(math.sqrt(max(0.0, float(w @ legendre @ w))))
    return np.array(powers)


def moment(k, grid=40):
    """<|x|^k> over a uniform cube of side 1 about its centre."""
    x = _cell_points(grid)
    return float(np.mean(np.linalg.norm(x, axis=1) ** k))


def power_radius(q):
    """The q-th power mean of a uniform unit cube's distances from its centre (NodeGeometry's
    power radius with power_exponent = q), in units of the side."""
    return moment(q) ** (1.0 / q)


def smallest_field(n, seed, softening=1e-3, within=6.0):
    """Per octant about the cube's centre, the smallest |a| of the particles within `within`
    interparticle spacings of the centre, by direct summation over all n particles (mass 1/n),
    times n^(1/3) (so in units of G m / l²)."""
    rng = np.random.default_rng(seed)
    pos = rng.random((n, 3))
    spacing = n ** (-1.0 / 3.0)
    rel = pos - 0.5
    near = np.flatnonzero(np.linalg.norm(rel, axis=1) < within * spacing)
    acc = np.zeros((len(near), 3))
    eps2 = softening * softening
    step = max(1, 20_000_000 // max(1, len(near)))  # the differences below stay near 0.5 GB
    for start in range(0, n, step):
        src = pos[start : start + step]
        d = src[None, :, :] - pos[near][:, None, :]
        r2 = np.einsum("ijk,ijk->ij", d, d) + eps2
        acc += np.einsum("ij,ijk->ik", r2**-1.5, d) / n
    mag = np.linalg.norm(acc, axis=1)
    octant = (rel[near] > 0).astype(int) @ np.array([4, 2, 1])
    return [float(mag[octant == o].min()) * n ** (1.0 / 3.0) if np.any(octant == o) else float("nan")
            for o in range(8)]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[160000, 640000, 1280000])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    args = parser.parse_args()
    if min(args.n) < 1000:
        parser.error(f"--n {min(args.n)}: give at least 1000 particles")
    print("| n | seed | smallest |a| · n^(1/3) per octant | their median |")
    print("|---|---|---|---|")
    for n in args.n:
        for seed in args.seeds:
            k = smallest_field(n, seed)
            print(f"| {n} | {seed} | {' '.join(f'{v:.2f}' for v in k)} | {np.median(k):.2f} |", flush=True)


if __name__ == "__main__":
    main()
