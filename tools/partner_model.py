#!/usr/bin/env python3
"""Geometric model of the distributed walk's partners under the angle criterion.

Particles uniform in a cube; R ranks own equal, contiguous ranges of the Peano-Hilbert curve
(kfmm's curve: Skilling's transposed index, as core/hilbert.hpp). A rank's subtree roots are
the largest octree cells inside its range. The dual-tree walk opens a pair (a, b) of cells of
the same level into all child pairs when r_a + r_b > theta * d (r: half the cell diagonal, the
tight radius of a full cell of uniform particles; d: distance of the centres). Rank A must ask
rank B for the children of B's root b when a pair (a, b) fails with a a cell of A's particles
at b's level, every ancestor pair failing too (else the walk never reaches (a, b)). A's
partners: the ranks it asks and the ranks that ask it (it replies to them).

The model leaves out what the measured runs add (tools/weak_scaling.py): tight radii below half
the diagonal, M2P, the particle import and, unless --jitter moves the boundaries, the sampled
splitters' deviation from equal ranges; it is meant to show how the count grows with R, not to
reproduce it exactly. --replicated-depth D: every rank also holds D levels below the others'
roots (a larger replicated top tree), so it asks only when a pair fails below them.

Usage: tools/partner_model.py [--theta 0.75] [--ranks 16 32 ...] [--jitter 0.05 [--seed 2]]
                              [--replicated-depth 1]
"""
import argparse
import math

import numpy as np

KEY_BITS = 21


def hilbert_keys(ix, iy, iz):
    """kfmm's hilbert_key (core/hilbert.hpp) of 21-bit integer coordinates, vectorised."""
    x, y, z = (np.asarray(a, dtype=np.uint64) & np.uint64((1 << KEY_BITS) - 1) for a in (ix, iy, iz))
    for bit in range(KEY_BITS - 1, 0, -1):
        p = np.uint64((1 << bit) - 1)
        one = np.uint64(1)
        b = np.uint64(bit)
        u, v, w = x.copy(), y.copy(), z.copy()
        u ^= np.where((u >> b) & one, p, np.uint64(0))
        setv = (v >> b) & one
        u ^= np.where(setv, p, np.uint64(0))
        t = np.where(setv, np.uint64(0), (u ^ v) & p)
        u ^= t
        v ^= t
        setw = (w >> b) & one
        u ^= np.where(setw, p, np.uint64(0))
        t = np.where(setw, np.uint64(0), (u ^ w) & p)
        u ^= t
        w ^= t
        x, y, z = u, v, w
    u = x
    v = y ^ u
    w = z ^ v
    t = np.zeros_like(u)
    for bit in range(KEY_BITS - 1, 0, -1):
        t ^= np.where((w >> np.uint64(bit)) & np.uint64(1), np.uint64((1 << bit) - 1), np.uint64(0))
    u, v, w = u ^ t, v ^ t, w ^ t
    key = np.zeros_like(u)
    for q in range(KEY_BITS):
        qb = np.uint64(q)
        key |= ((u >> qb) & np.uint64(1)) << np.uint64(3 * q + 2)
        key |= ((v >> qb) & np.uint64(1)) << np.uint64(3 * q + 1)
        key |= ((w >> qb) & np.uint64(1)) << np.uint64(3 * q)
    return key


def model(num_ranks, theta, jitter=0.0, seed=1, replicated_depth=0):
    """`jitter` > 0: each boundary between ranks moves by a uniform random fraction of a domain
    in [-jitter, jitter] (sampled splitters miss the equal ranges; slivers of the next cell).
    `replicated_depth` > 0: every rank also holds that many levels of the others' roots'
    descendants (a larger replicated top tree), so it asks only when a pair fails below them."""
    # Fine level: at least 64 fine cells per rank (512 with jitter), so that every rank's range
    # ends on them.
    fine = max(3, math.ceil(math.log((512 if jitter > 0 else 64) * num_ranks, 8)))
    side = 1 << fine
    g = np.arange(side, dtype=np.uint64)
    ix, iy, iz = np.meshgrid(g, g, g, indexing="ij")
    shift = np.uint64(KEY_BITS - fine)
    keys = hilbert_keys(ix.ravel() << shift, iy.ravel() << shift, iz.ravel() << shift) >> np.uint64(3 * (KEY_BITS - fine))
    # Cell coordinates by key at the fine level (keys are a permutation of 0 .. 8^fine - 1).
    coords = np.empty((side**3, 3), dtype=np.int64)
    coords[keys.astype(np.int64)] = np.stack([ix.ravel(), iy.ravel(), iz.ravel()], axis=1)
    total = side**3
    bounds = [total * r // num_ranks for r in range(num_ranks + 1)]
    if jitter > 0:
        rng = np.random.default_rng(seed)
        per_rank = total / num_ranks
        for r in range(1, num_ranks):
            bounds[r] = int(round(bounds[r] + rng.uniform(-jitter, jitter) * per_rank))
    owner_of_fine = np.repeat(np.arange(num_ranks), np.diff(bounds))

    # Subtree roots: cells one rank holds whole whose parent it does not (level by level, the
    # owner of each cell when one rank holds all of it, -1 when shared).
    roots = {}  # (level, x, y, z) -> owner
    parent_whole = np.array([False])
    for level in range(0, fine + 1):
        cells = 8 ** (fine - level)
        first = owner_of_fine[0::cells]
        whole = first == owner_of_fine[cells - 1 :: cells]
        new_root = np.flatnonzero(whole & ~np.repeat(parent_whole, 8 if level > 0 else 1))
        cell_coords = coords[new_root * cells] >> (fine - level)
        for c, xyz in zip(new_root, cell_coords):
            roots[(level,) + tuple(int(v) for v in xyz)] = int(first[c])
        parent_whole = whole

    fine_key = np.empty((side, side, side), dtype=np.int64)
    fine_key[coords[:, 0], coords[:, 1], coords[:, 2]] = np.arange(total)

    def holders(a, level):
        # Ranks with particles in cell a of the level: those owning its range of fine cells.
        up = fine - level
        first = fine_key[a[0] << up, a[1] << up, a[2] << up] >> (3 * up) << (3 * up)
        return range(owner_of_fine[first], owner_of_fine[first + 8**up - 1] + 1)

    def fails(a, b, size):
        d = math.sqrt(sum((a[i] - b[i]) ** 2 for i in range(3))) * size
        r = 0.5 * math.sqrt(3.0) * size
        return 2 * r > theta * d

    def chain_fails(a, b, level):
        # Every pair of ancestors down from the root fails (or is the same cell).
        for up in range(1, level):
            sa = tuple(v >> up for v in a)
            sb = tuple(v >> up for v in b)
            if sa == sb:
                return True
            if not fails(sa, sb, 1.0 / (1 << (level - up))):
                return False
        return True

    reach = math.sqrt(3.0) / theta
    cells_out = int(math.ceil(reach))
    steps = range(-cells_out, cells_out + 1)
    offsets = [(dx, dy, dz) for dx in steps for dy in steps for dz in steps if 0 < dx * dx + dy * dy + dz * dz < reach * reach]
    asks = [set() for _ in range(num_ranks)]
    asked_cells = {}
    for (level, bx, by, bz), owner in roots.items():
        depth = min(replicated_depth, fine - level)
        n = 1 << depth
        for cx in range(n):
            for cy in range(n):
                for cz in range(n):
                    asked_cells[(level + depth, (bx << depth) + cx, (by << depth) + cy, (bz << depth) + cz)] = owner
    replicated_records = len(asked_cells)
    for (level, bx, by, bz), owner in asked_cells.items():
        n = 1 << level
        for dx, dy, dz in offsets:
            a = (bx + dx, by + dy, bz + dz)
            if not (0 <= a[0] < n and 0 <= a[1] < n and 0 <= a[2] < n):
                continue
            if not chain_fails(a, (bx, by, bz), level):
                continue
            for rank in holders(a, level):
                if rank != owner:
                    asks[rank].add(owner)
    partners = [set(asks[r]) for r in range(num_ranks)]
    for r in range(num_ranks):
        for o in asks[r]:
            partners[o].add(r)
    counts = np.array([len(p) for p in partners])
    asked = np.array([len(a) for a in asks])
    top = np.argsort(-counts)[:4]
    return {
        "asked_mean": asked.mean(),
        "asked_max": asked.max(),
        "mean": counts.mean(),
        "max": counts.max(),
        "median": float(np.median(counts)),
        "most": [(int(r), int(counts[r])) for r in top],
        "replicated": replicated_records,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--theta", type=float, default=0.75)
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024])
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="move each boundary between ranks by up to this fraction of a domain (random)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replicated-depth", type=int, default=0,
                        help="levels of the roots' descendants every rank also holds")
    args = parser.parse_args()
    if not 0 <= args.jitter < 0.5:
        parser.error(f"--jitter {args.jitter}: give a fraction of a domain in [0, 0.5), so that boundaries keep their order")
    if not 0 < args.theta < 1.5:
        parser.error(f"--theta {args.theta}: give an opening angle in (0, 1.5), as kfmm accepts")
    if min(args.ranks) < 1 or args.replicated_depth < 0:
        parser.error("--ranks must be at least 1 and --replicated-depth at least 0")
    print("| R | asks (mean / max) | partners (mean / max) | median | most connected (partners) | replicated cells |")
    print("|---|---|---|---|---|---|")
    for r in args.ranks:
        m = model(r, args.theta, args.jitter, args.seed, args.replicated_depth)
        most = ", ".join(f"{rank} ({n})" for rank, n in m["most"])
        print(f"| {r} | {m['asked_mean']:.1f} / {m['asked_max']} | {m['mean']:.1f} / {m['max']} | {m['median']:.0f} | {most} | {m['replicated']} |",
              flush=True)


if __name__ == "__main__":
    main()
