#!/usr/bin/env python3
"""Kill-anywhere restart test (ctest apps.kill_anywhere; apps.kill_anywhere.per_rank: --layout per-rank).

Runs `kfmm run` on 2 ranks, kills it with SIGKILL at many moments -- named fault points
(KFMM_FAULT_INJECTION: snapshot and restart writes on rank 0, rank 1 or both, the directory
swap, diagnostics rows, steps) and random wall-clock delays (fixed seed) -- and continues it each
time with `kfmm run RUNFILE --restart`. Checks after every kill: the whole MPI job has ended
with no process left; every snapshot under its final name opens, has complete datasets and
equals the uninterrupted run's; a complete restart exists (once one was written). At the end of
each chain of kills: every snapshot and diagnostics.csv equal the uninterrupted run's, and no
temporary file is left behind. With --layout per-rank (snapdir_NNN/, a file per rank) only the
snapshot and step kills run, with half the random ones.

A kill before the first restart is followed by a fresh start, as a user would do; a kill that
needs a continued run (marked "restart") gets a kill at step 2 before it when none is on disk. A
kill not reached because the run finished first ends that chain (checked like the last one) and
is tried again in a new chain. Logs of every launch stay in the work directory on failure.

Snapshots are compared as stored, not sorted by ParticleIDs: rows are in the owner order of the
last force call, and a restart keeps each rank's particles in order together with the cost
weights of the decomposition, so a continued run stores the same order; comparing as stored
checks that as well (a mismatch is also reported sorted by id, to tell order from values).
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import h5py
import numpy as np

RUN_FILE = """\
ic:
  kind: plummer
  n: 3000
  seed: 11
force:
  method: fmm
  leaf_size: 32
  softening_length: 0.05
integrator:
  kind: dkd
time:
  end: 0.4
  outputs: 8
  steps_per_output: 2
output:
  precision: double
  compression: 1
  restart_every: 1
  layout: {layout}
"""
OUTPUTS = 8          # snapshots 000 .. 008
TOTAL = 3000
DATASETS = ("Coordinates", "Velocities", "ParticleIDs", "Masses", "Potential", "Acceleration")
# Final names only, not *.tmp-*: one file, or a directory with a file per rank.
SNAPSHOT = {"single": re.compile(r"^snapshot_(\d{3})\.hdf5$"), "per-rank": re.compile(r"^snapdir_(\d{3})$")}

# (point, occurrence, rank[, condition]): rank None = every rank. The occurrences count from
# the start of each launch; a continued run reaches its first snapshot after ≤ 2 steps, its
# first restart after 1 step. Conditions: "restart" -- a restart must be on disk (else a launch
# killed at step 2 comes first), so that the kill hits a continued run; "next" -- no random kill
# goes before it, so the two swap kills are consecutive and the second hits the directory swap
# while only restart.old holds a restart.
POINT_KILLS = [
    ("step", 3, None),
    ("snapshot.dataset", 3, None),
    ("snapshot.written", 1, 0),
    ("snapshot.written", 1, 1),
    ("snapshot.written", 2, None),
    ("snapshot.dataset", 8, 1),
    ("snapshot.renamed", 1, 0),
    ("snapshot.renamed", 1, 1),
    ("restart.rank_written", 2, 0),
    ("restart.rank_written", 1, 1),
    ("restart.rank_written", 3, None),
    ("restart.swapping", 1, 0, "restart"),
    ("restart.swapping", 1, 0, "next"),
    ("restart.swapped", 2, 0),
    ("restart.swapped", 1, 0),
    ("diagnostics.row", 2, 0),
    ("diagnostics.resume", 1, 0, "restart"),
    ("diagnostics.resume", 1, 0, "restart"),
    ("step", 1, 1),
    ("snapshot.written", 1, None),
]
RANDOM_KILLS = 8
WORK = []  # the work directory, for the failure message
SEED = 20261202


def log(*args):
    print(*args, flush=True)


class Failure(Exception):
    pass


def children(pid):
    """Process ids whose parent is `pid` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return found


def rank_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"OMPI_COMM_WORLD_RANK="):
                    return int(item.split(b"=", 1)[1])
    except OSError:
        pass
    return None


def alive(pid):
    """Whether `pid` is a live (not zombie) process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


class Launcher:
    def __init__(self, args, run_file, directory):
        self.args, self.run_file, self.directory = args, run_file, directory

    def launch(self, restart, fault=None, kill_after=None, kill_rank=0, log_name="run"):
        """Runs kfmm to its end or death; returns (exit status, whether we or a fault killed it, stderr)."""
        command = [self.args.mpiexec, "--oversubscribe", "-np", "2", self.args.kfmm, "run", self.run_file,
                   "-o", self.directory] + (["--restart"] if restart else [])
        environment = dict(os.environ)
        environment.pop("KFMM_FAULT_INJECTION", None)
        if fault:
            environment["KFMM_FAULT_INJECTION"] = fault
        out_path = os.path.join(self.args.work, log_name + ".log")
        with open(out_path, "w") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=environment,
                                       start_new_session=True)
            seen = set()   # every process of the job, to find strays once mpirun is gone
            start = time.monotonic()
            killed_by_us = False
            while process.poll() is None:
                stack = [process.pid]
                while stack:
                    for child in children(stack.pop()):
                        if child not in seen:
                            seen.add(child)
                        stack.append(child)
                if kill_after is not None and not killed_by_us and time.monotonic() - start >= kill_after:
                    ranks = {rank_of(p): p for p in seen if alive(p)}
                    if kill_rank in ranks:
                        os.kill(ranks[kill_rank], signal.SIGKILL)
                        killed_by_us = True
                if time.monotonic() - start > self.args.launch_timeout:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    raise Failure(f"kfmm did not end within {self.args.launch_timeout} s ({out_path})")
                time.sleep(0.01)
        # mpirun is gone: none of its ranks may be left.
        deadline = time.monotonic() + 10
        while any(alive(p) for p in seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        strays = [p for p in seen if alive(p)]
        for p in strays:
            os.kill(p, signal.SIGKILL)
        if strays:
            raise Failure(f"processes {strays} of the killed job were still running 10 s after mpirun ended")
        text = open(out_path, errors="replace").read()
        fault_killed = "kfmm: fault injection: SIGKILL" in text
        return process.returncode, killed_by_us or fault_killed, text


def snapshot_path(directory, number, layout):
    name = f"snapshot_{number:03d}.hdf5" if layout == "single" else f"snapdir_{number:03d}"
    return os.path.join(directory, name)


def read_snapshot(path):
    """(Time, NumPart_Total, datasets) of a snapshot file or snapdir (its files in order)."""
    if not os.path.isdir(path):
        files = [path]
    else:
        stem = os.path.basename(path).replace("snapdir_", "snapshot_")
        files = [os.path.join(path, f"{stem}.{i}.hdf5") for i in range(2)]
        if sorted(os.listdir(path)) != sorted(os.path.basename(f) for f in files):
            raise ValueError(f"holds {sorted(os.listdir(path))}, expected the 2 files of a 2-rank snapshot")
    parts = []
    for file in files:
        with h5py.File(file, "r") as f:
            header = f["Header"].attrs
            this_file = int(header["NumPart_ThisFile"][1])
            data = {name: f["PartType1"][name][...] for name in DATASETS}
            for name, values in data.items():
                if values.shape[0] != this_file:
                    raise ValueError(f"{file}: {name} has {values.shape[0]} rows, NumPart_ThisFile {this_file}")
            parts.append((float(header["Time"]), int(header["NumPart_Total"][1]), data))
    data = {name: np.concatenate([part[2][name] for part in parts]) for name in DATASETS}
    return parts[0][0], parts[0][1], data


def compare_snapshot(path, reference, what):
    try:
        time_, total, data = read_snapshot(path)
    except Exception as e:
        raise Failure(f"{what}: {path} exists under its final name but does not read: {e}")
    ref_time, ref_total, ref = reference
    if total != TOTAL:
        raise Failure(f"{what}: {path} has NumPart_Total {total}, expected {TOTAL}")
    for name in DATASETS:
        if data[name].shape[0] != TOTAL:
            raise Failure(f"{what}: {path} dataset {name} has {data[name].shape[0]} rows, expected {TOTAL}")
    if time_ != ref_time:
        raise Failure(f"{what}: {path} has Time {time_!r}, the uninterrupted run {ref_time!r}")
    for name in DATASETS:
        if not np.array_equal(data[name], ref[name]):
            order, ref_order = np.argsort(data["ParticleIDs"]), np.argsort(ref["ParticleIDs"])
            sorted_equal = np.array_equal(data[name][order], ref[name][ref_order])
            raise Failure(f"{what}: {path} dataset {name} differs from the uninterrupted run's "
                          f"({'equal' if sorted_equal else 'also different'} after sorting by ParticleIDs)")


def check_restart(directory, what):
    """A complete restart under restart/ or restart.old/: both rank files open, same step, all particles."""
    for name in ("restart", "restart.old"):
        path = os.path.join(directory, name)
        if not os.path.isdir(path):
            continue
        steps, count = set(), 0
        for rank in range(2):
            file = os.path.join(path, f"rank_{rank:04d}.h5")
            try:
                with h5py.File(file, "r") as f:
                    steps.add(int(f.attrs["step"]))
                    count += f["ids"].shape[0]
            except Exception as e:
                raise Failure(f"{what}: {path} is the restart a continued run reads but {file} does not read: {e}")
        if len(steps) != 1 or count != TOTAL:
            raise Failure(f"{what}: {path} is inconsistent (steps {sorted(steps)}, {count} particles)")
        return steps.pop()
    return None


def check_after_kill(directory, references, layout, what):
    if not os.path.isdir(directory):
        return None  # killed before the run created its output directory: nothing written yet
    for entry in sorted(os.listdir(directory)):
        match = SNAPSHOT[layout].match(entry)
        if match:
            compare_snapshot(os.path.join(directory, entry), references[int(match.group(1))], what)
    return check_restart(directory, what)


def check_final(directory, references, reference_diagnostics, layout, what):
    for number in range(OUTPUTS + 1):
        path = snapshot_path(directory, number, layout)
        if not os.path.exists(path):
            raise Failure(f"{what}: {path} is missing after the run finished")
        compare_snapshot(path, references[number], what)
    with open(os.path.join(directory, "diagnostics.csv")) as f:
        diagnostics = f.read()
    if diagnostics != reference_diagnostics:
        ours, theirs = diagnostics.splitlines(), reference_diagnostics.splitlines()
        steps = [line.split(",")[0] for line in ours[1:]]
        raise Failure(f"{what}: diagnostics.csv differs from the uninterrupted run's ({len(ours)} lines against "
                      f"{len(theirs)}; steps {','.join(steps)})")
    leftovers = [e for e in os.listdir(directory) if ".tmp" in e or e.endswith(".old")]
    if leftovers:
        raise Failure(f"{what}: temporary files left behind after the run finished: {sorted(leftovers)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kfmm", required=True)
    parser.add_argument("--mpiexec", default="mpirun")
    parser.add_argument("--work", default=None, help="work directory (default: a new temporary one, removed on success)")
    parser.add_argument("--launch-timeout", type=float, default=120)
    parser.add_argument("--layout", choices=["single", "per-rank"], default="single",
                        help="snapshot layout; per-rank runs the snapshot kills only (and fewer random ones)")
    args = parser.parse_args()
    keep = args.work is not None
    args.work = args.work or tempfile.mkdtemp(prefix="kfmm_kill_anywhere_")
    WORK.append(args.work)
    os.makedirs(args.work, exist_ok=True)
    run_file = os.path.join(args.work, "run.yaml")
    with open(run_file, "w") as f:
        f.write(RUN_FILE.format(layout=args.layout))
    started = time.monotonic()

    # The uninterrupted run.
    reference_dir = os.path.join(args.work, "reference")
    shutil.rmtree(reference_dir, ignore_errors=True)
    t0 = time.monotonic()
    status, _, text = Launcher(args, run_file, reference_dir).launch(False, log_name="reference")
    reference_seconds = time.monotonic() - t0
    if status != 0:
        raise Failure(f"the uninterrupted run failed (exit {status}):\n{text}")
    references = [read_snapshot(snapshot_path(reference_dir, k, args.layout)) for k in range(OUTPUTS + 1)]
    with open(os.path.join(reference_dir, "diagnostics.csv")) as f:
        reference_diagnostics = f.read()
    log(f"uninterrupted run: {reference_seconds:.2f} s")

    # The schedule: every point kill, with random-delay kills (fixed seed) spread among them.
    rng = random.Random(SEED)
    points = [k for k in POINT_KILLS if args.layout == "single" or k[0].startswith(("snapshot.", "step"))]
    random_kills = RANDOM_KILLS if args.layout == "single" else RANDOM_KILLS // 2
    minimum_kills = 20 if args.layout == "single" else 10
    schedule = [("point", f"{p}:{n}:{'*' if r is None else r}", c[0] if c else None) for p, n, r, *c in points]
    for _ in range(random_kills):
        delay = round(rng.uniform(0.1, 0.9) * reference_seconds, 3)
        position = rng.randrange(len(schedule) + 1)
        while position < len(schedule) and schedule[position][2] == "next":
            position -= 1
        schedule.insert(position, ("delay", (delay, rng.randrange(2)), None))
    log("schedule:")
    for kind, value, condition in schedule:
        log(f"  {kind:5s} {value if kind == 'point' else f'SIGKILL to rank {value[1]} after {value[0]} s'}"
            f"{f'  ({condition})' if condition else ''}")

    directory = os.path.join(args.work, "killed")
    shutil.rmtree(directory, ignore_errors=True)
    launcher = Launcher(args, run_file, directory)
    kills, chains, launches = {}, 1, 0
    restart_written = False
    retried = set()
    index = 0
    while index < len(schedule):
        kind, value, condition = schedule[index]
        if condition == "restart" and not restart_written:
            schedule.insert(index, ("point", "step:2:*", None))
            continue
        what = f"kill {index + 1} ({kind} {value})"
        restart = restart_written
        launches += 1
        if kind == "point":
            status, killed, text = launcher.launch(restart, fault=value, log_name=f"launch_{launches}")
        else:
            status, killed, text = launcher.launch(restart, kill_after=value[0], kill_rank=value[1],
                                                   log_name=f"launch_{launches}")
        if status == 0 and not killed:
            # The run finished first: check it, then start a new chain with this kill again.
            check_final(directory, references, reference_diagnostics, args.layout, f"chain {chains} end")
            log(f"  {what}: not reached, the run finished; chain {chains} checked")
            shutil.rmtree(directory)
            chains += 1
            restart_written = False
            if id(schedule[index]) in retried:
                if kind == "point":
                    raise Failure(f"{what} was not reached in two chains; the schedule does not fit the run")
                # A delay drawn from the reference run's wall time can outlast a run on a machine
                # whose load fell since; the count of random-delay kills below still has to hold.
                log(f"  {what}: not reached in two chains (the machine got faster); skipped")
                index += 1
                continue
            retried.add(id(schedule[index]))
            continue
        if not killed:
            raise Failure(f"{what}: kfmm failed by itself (exit {status}) instead of being killed:\n{text[-3000:]}")
        step = check_after_kill(directory, references, args.layout, what)
        if step is None and restart_written:
            raise Failure(f"{what}: no restart on disk although one had been written")
        restart_written = step is not None
        phase = value.split(":")[0] if kind == "point" else "random delay"
        kills[phase] = kills.get(phase, 0) + 1
        log(f"  {what}: killed; restart at step {step}")
        index += 1

    # Continue to the end without faults and compare.
    launches += 1
    status, killed, text = launcher.launch(restart_written, log_name=f"launch_{launches}")
    if status != 0:
        raise Failure(f"the final continuation failed (exit {status}):\n{text[-3000:]}")
    check_final(directory, references, reference_diagnostics, args.layout, f"chain {chains} end")
    total = sum(kills.values())
    log(f"{total} kills in {chains} chains, {launches} launches, {time.monotonic() - started:.1f} s; by phase:")
    for phase, count in sorted(kills.items()):
        log(f"  {phase:22s} {count}")
    if kills.get("random delay", 0) < random_kills // 2:
        raise Failure(f"only {kills.get('random delay', 0)} random-delay kills happened")
    if total < minimum_kills:
        raise Failure(f"only {total} kills happened; the test needs ≥ {minimum_kills}")
    if not keep:
        shutil.rmtree(args.work)


if __name__ == "__main__":
    try:
        main()
    except Failure as e:
        print(f"FAILED: {e}\n(logs and files in {WORK[0] if WORK else '?'})", file=sys.stderr, flush=True)
        sys.exit(1)
