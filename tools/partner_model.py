#!/usr/bin/env python3
"""Geometric model of the distributed walk's partners (the angle criterion; the relative one with
--criterion relative).

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

--criterion relative runs walk_model(): the walk itself, level by level (a target's candidates
are the children of the sources its parent opened), with kfmm's relative criterion (class
Relative) on uniform particles, --per-rank of them per rank; under the angle test alone the walk
counts what model() counts.

Usage: tools/partner_model.py [--theta 0.75] [--ranks 16 32 ...] [--jitter 0.05 [--seed 2]]
                              [--replicated-depth 1]
       tools/partner_model.py --criterion relative [--per-rank 1e4] [--tolerance 1e-5]
                              [--order 7] [--floor 4.5] [--ranks ...] [--jitter ...]
"""
import argparse
import math

import numpy as np

import uniform_cube

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


def domains(num_ranks, jitter=0.0, seed=1):
    """The ranks' Hilbert ranges on a fine grid of cells: (fine level, coordinates of the fine
    cells by key, owner of each fine cell by key, subtree roots {(level, x, y, z): owner}, key of
    each fine cell by coordinates). `jitter` > 0: each boundary between ranks moves by a uniform
    random fraction of a domain in [-jitter, jitter] (sampled splitters miss the equal ranges;
    slivers of the next cell)."""
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
    return fine, coords, owner_of_fine, roots, fine_key


def summary(counts, asked):
    """What both models report from each rank's partners and asked ranks."""
    top = np.argsort(-counts)[:4]
    return {
        "asked_mean": asked.mean(),
        "asked_max": asked.max(),
        "mean": counts.mean(),
        "max": counts.max(),
        "median": float(np.median(counts)),
        "most": [(int(r), int(counts[r])) for r in top],
    }


def model(num_ranks, theta, jitter=0.0, seed=1, replicated_depth=0):
    """The angle criterion's partners, from the offsets within the opening distance of every
    root (`jitter`, `seed`: domains()). `replicated_depth` > 0: every rank also holds that many
    levels of the others' roots' descendants (a larger replicated top tree), so it asks only when
    a pair fails below them."""
    fine, coords, owner_of_fine, roots, fine_key = domains(num_ranks, jitter, seed)

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
    return dict(summary(counts, asked), replicated=replicated_records)


class Relative:
    """The relative criterion (fmm/dual_tree_walk.hpp, OpeningTest) on uniform particles in the
    unit cube (G = 1, total mass 1, `particles` of them): a pair (a, b) that passes the angle test
    goes to M2L only if E_ab = max_n C(p+1, n) T_n r_a^(p+1-n) / d^(p+3) <= alpha min|a_i| / c_a.
    T_n of a full cell are the uniform cube's harmonic multipole powers (uniform_cube.py) plus the
    particles' shot noise; min|a_i| over a cell is the smooth field where the cell comes nearest
    the cube's centre, but at least `floor` G m / l^2 (l the interparticle spacing: the graininess
    near the centre, where the smooth field vanishes, measured by uniform_cube.py); c_a is the
    coherence of a's candidates that pass the angle test, weighted by E (at least
    `coherence_floor`)."""

    def __init__(self, particles, tolerance=1e-5, order=7, floor=4.5, coherence_floor=0.3):
        self.particles, self.tolerance, self.order = particles, tolerance, order
        self.floor, self.coherence_floor = floor, coherence_floor
        q = order + 1
        self.q = q
        cube = uniform_cube.multipole_power(order)
        self.cube_power = [cube[n] for n in range(q)]
        self.noise = [uniform_cube.moment(2 * n) ** 0.5 for n in range(q)]
        self.power_radius = uniform_cube.power_radius(q)
        self.field = uniform_cube.field

    def coefficient(self, size):
        """max_n C(q, n) T_n r^(q-n) of a full cell of the given side (r: half its diagonal)."""
        q, mass = self.q, size**3
        cell_particles = max(1.0, self.particles * mass)
        r = 0.5 * math.sqrt(3.0) * size
        terms = [mass * r**q, mass * (self.power_radius * size) ** q]
        for n in range(1, q):
            h = math.hypot(self.cube_power[n], self.noise[n] / math.sqrt(cell_particles))
            terms.append(math.comb(q, n) * h * mass * size**n * r ** (q - n))
        return max(terms)

    def allowance(self, cells, size):
        """alpha times the smallest |a| of the particles of each cell (coordinates at this size)."""
        low = cells * size
        nearest = np.clip(0.5, low, low + size)
        smooth = np.linalg.norm(self.field(nearest), axis=1)
        grain = self.floor * self.particles ** (-1.0 / 3.0)
        return self.tolerance * np.maximum(smooth, grain)

    def accept(self, target, offset, angle, size, allowed):
        """Which pairs (target index, offset to the source in cells) pass, given the angle test's
        result `angle` and each target's allowance."""
        cells = np.linalg.norm(offset, axis=1)
        weight = np.where(angle, self.coefficient(size) / np.where(angle, cells * size, 1.0) ** (self.q + 2), 0.0)
        unit = offset / np.maximum(cells, 1e-300)[:, None]
        count = len(allowed)
        W = np.bincount(target, weight, count)
        D = np.stack([np.bincount(target, weight * unit[:, k], count) for k in range(3)], axis=1)
        Q = [np.bincount(target, weight * unit[:, i] * unit[:, j], count) for i, j in
             ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))]
        with np.errstate(divide="ignore", invalid="ignore"):
            dipole = np.linalg.norm(D, axis=1) / W
            q2 = sum((Q[k] / W - 1.0 / 3) ** 2 for k in range(3)) + sum(2 * (Q[k] / W) ** 2 for k in range(3, 6))
            c = np.maximum(np.maximum(dipole, np.sqrt(1.5 * q2)), self.coherence_floor)
        c = np.where(W > 0, c, 1.0)
        return angle & (weight <= (allowed / c)[target])


def walk_model(num_ranks, theta, relative=None, jitter=0.0, seed=1, chunk=1 << 21):
    """The partners of the walk itself, level by level down to the deepest subtree root: a
    target's candidates are the children of the sources its parent opened (the root cell opens
    itself), a pair is opened unless it passes the angle test (r_a + r_b < theta d) and, with
    `relative` (a Relative), the relative criterion. Rank A asks rank B when a pair (a, b) is
    opened with b one of B's roots and a holding A's particles. Under the angle test alone it
    counts what model() counts."""
    fine, coords, owner_of_fine, roots, fine_key = domains(num_ranks, jitter, seed)
    deepest = max(level for level, *_ in roots)
    root_owner = [np.full(8**level, -1, dtype=np.int64) for level in range(deepest + 1)]
    for (level, x, y, z), owner in roots.items():
        n = 1 << level
        root_owner[level][(x * n + y) * n + z] = owner
    codes = []
    # Level 1: every child of the root cell against every other (the root opened itself).
    cells = np.array([(x, y, z) for x in range(2) for y in range(2) for z in range(2)], dtype=np.int64)
    parent_t = np.repeat(np.arange(8), 8)
    parent_s = np.tile(np.arange(8), 8)
    pairs = (cells[parent_t], cells[parent_s])
    child = np.array([(x, y, z) for x in range(2) for y in range(2) for z in range(2)], dtype=np.int64)
    walked = 0
    for level in range(1, deepest + 1):
        n = 1 << level
        size = 1.0 / n
        up = fine - level
        opened_next = []
        t_all, s_all = pairs
        # Chunks of whole targets, so that each target's coherence sees all its candidates.
        order = np.lexsort((s_all[:, 2], s_all[:, 1], s_all[:, 0], t_all[:, 2], t_all[:, 1], t_all[:, 0]))
        t_all, s_all = t_all[order], s_all[order]
        t_index = (t_all[:, 0] * n + t_all[:, 1]) * n + t_all[:, 2]
        starts = np.flatnonzero(np.r_[True, t_index[1:] != t_index[:-1]])
        per_target = max(1, len(t_all) // len(starts))
        bounds = list(range(0, len(starts), max(1, chunk // per_target))) + [len(starts)]
        for lo_start, hi_start in zip(bounds[:-1], bounds[1:]):
            lo = starts[lo_start]
            hi = starts[hi_start] if hi_start < len(starts) else len(t_all)
            t, s = t_all[lo:hi], s_all[lo:hi]
            offset = (s - t).astype(float)
            same = np.all(s == t, axis=1)
            d = np.linalg.norm(offset, axis=1)
            angle = ~same & (math.sqrt(3.0) < theta * d)
            if relative is not None:
                targets, target = np.unique((t[:, 0] * n + t[:, 1]) * n + t[:, 2], return_inverse=True)
                cells_t = np.stack([targets // (n * n), targets // n % n, targets % n], axis=1)
                ok = relative.accept(target, offset, angle, size, relative.allowance(cells_t, size))
            else:
                ok = angle
            opened = ~ok
            walked += len(t)
            ot, os_ = t[opened], s[opened]
            s_index = (os_[:, 0] * n + os_[:, 1]) * n + os_[:, 2]
            owner = root_owner[level][s_index]
            asked = owner >= 0
            if np.any(asked):
                at, aowner = ot[asked], owner[asked]
                first = fine_key[at[:, 0] << up, at[:, 1] << up, at[:, 2] << up] >> (3 * up) << (3 * up)
                holder_lo = owner_of_fine[first]
                holder_hi = owner_of_fine[first + 8**up - 1]
                for k in range(int((holder_hi - holder_lo).max()) + 1):
                    rank = holder_lo + k
                    valid = (rank <= holder_hi) & (rank != aowner)
                    codes.append(np.unique(rank[valid] * num_ranks + aowner[valid]))
            if level < deepest and len(ot):
                opened_next.append((ot, os_))
        if level == deepest:
            break
        if not opened_next:
            break
        ot = np.concatenate([o[0] for o in opened_next])
        os_ = np.concatenate([o[1] for o in opened_next])
        # Children: each child of a against each child of b (pairs index [opened pair, a's child,
        # b's child]).
        shape = (len(ot), 8, 8, 3)
        ct = np.broadcast_to(2 * ot[:, None, None, :] + child[None, :, None, :], shape)
        cs = np.broadcast_to(2 * os_[:, None, None, :] + child[None, None, :, :], shape)
        pairs = (ct.reshape(-1, 3), cs.reshape(-1, 3))
    code = np.unique(np.concatenate(codes)) if codes else np.zeros(0, dtype=np.int64)
    asker, owner = code // num_ranks, code % num_ranks
    partner = np.unique(np.concatenate([asker * num_ranks + owner, owner * num_ranks + asker]))
    counts = np.bincount(partner // num_ranks, minlength=num_ranks)
    asked = np.bincount(asker, minlength=num_ranks)
    return dict(summary(counts, asked), pairs=walked)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--criterion", choices=["angle", "relative"], default="angle",
                        help="relative: the walk model with kfmm's default relative criterion (walk_model)")
    parser.add_argument("--theta", type=float, default=None, help="opening angle (0.75 angle, 0.95 relative)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512, 1024])
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="move each boundary between ranks by up to this fraction of a domain (random)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--replicated-depth", type=int, default=0,
                        help="levels of the roots' descendants every rank also holds (angle)")
    parser.add_argument("--per-rank", type=float, default=1e4, help="relative: particles per rank")
    parser.add_argument("--tolerance", type=float, default=1e-5, help="relative: alpha")
    parser.add_argument("--order", type=int, default=7, help="relative: expansion order p")
    parser.add_argument("--floor", type=float, default=4.5,
                        help="relative: the smallest |a| near the cube's centre in G m / l^2 (uniform_cube.py)")
    args = parser.parse_args()
    relative = args.criterion == "relative"
    theta = args.theta if args.theta is not None else (0.95 if relative else 0.75)
    if not 0 <= args.jitter < 0.5:
        parser.error(f"--jitter {args.jitter}: give a fraction of a domain in [0, 0.5), so that boundaries keep their order")
    if not 0 < theta < 1.5:
        parser.error(f"--theta {theta}: give an opening angle in (0, 1.5), as kfmm accepts")
    if min(args.ranks) < 1 or args.replicated_depth < 0:
        parser.error("--ranks must be at least 1 and --replicated-depth at least 0")
    if relative and args.replicated_depth:
        parser.error("--replicated-depth is a variant of the angle model; leave it out with --criterion relative")
    for name, value, ok, limit in (("--per-rank", args.per_rank, args.per_rank >= 1, "at least 1"),
                                   ("--tolerance", args.tolerance, 0 < args.tolerance <= 1, "in (0, 1], as kfmm accepts"),
                                   ("--order", args.order, 1 <= args.order <= 8, "1 ... 8, as kfmm accepts"),
                                   ("--floor", args.floor, args.floor > 0, "> 0")):
        if relative and not ok:
            parser.error(f"{name} {value:g}: give a value {limit}")
    print("| R | asks (mean / max) | partners (mean / max) | median | most connected (partners) | "
          + ("pairs walked |" if relative else "replicated cells |"))
    print("|---|---|---|---|---|---|")
    for r in args.ranks:
        if relative:
            m = walk_model(r, theta, Relative(args.per_rank * r, args.tolerance, args.order, args.floor), args.jitter,
                           args.seed)
            last = m["pairs"]
        else:
            m = model(r, theta, args.jitter, args.seed, args.replicated_depth)
            last = m["replicated"]
        most = ", ".join(f"{rank} ({n})" for rank, n in m["most"])
        print(f"| {r} | {m['asked_mean']:.1f} / {m['asked_max']} | {m['mean']:.1f} / {m['max']} | {m['median']:.0f} | {most} | {last} |",
              flush=True)


if __name__ == "__main__":
    main()
