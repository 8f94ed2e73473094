#!/usr/bin/env python3
"""tools/trace_partners.py on synthetic tools/mpi_calls.c traces of two ranks and two evaluations,
laid out as kfmm's distributed evaluation calls them: the domain phase (its exchange holds a
consensus too), the top tree's Allgatherv followed by several Allreduces, walk levels of one
Allreduce and one consensus each (a level may send nothing), statistics after the walk. The
table must describe the second evaluation's walk, level by level.

  test_trace_partners.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile


def evaluation(rank, levels):
    other = 1 - rank
    calls = ["C Allreduce", "C Allgather", "C Allgatherv"]  # bounds, splitter samples
    calls += ["C Allreduce"] * 3 + ["S {} 7302 8".format(other), "C Ibarrier", "S {} 7301 64".format(other)]
    calls += ["C Allreduce", "C Allgather", "C Allgatherv"]  # the top tree
    calls += ["C Allreduce"] * 3  # its agreement and the shared cells' allowances
    for asked, answered in levels:
        calls.append("C Allreduce")
        calls += ["S {} 7302 16".format(other)] if asked[rank] else []
        calls.append("C Ibarrier")
        calls += ["S {} 7301 128".format(other)] if answered[rank] else []
    return calls + ["C Allreduce"] * 5  # local stages agreed, statistics


def main():
    tool = os.path.join(sys.argv[1], "tools", "trace_partners.py")
    # (asks per rank, sends data per rank) for each level; the last level is the particle import.
    first = [((0, 0), (0, 0)), ((1, 1), (1, 1))]
    last = [((0, 0), (0, 0)), ((1, 0), (0, 1)), ((1, 1), (1, 1)), ((0, 1), (1, 0))]
    with tempfile.TemporaryDirectory() as work:
        prefix = os.path.join(work, "trace")
        for rank in (0, 1):
            calls = ["C Comm_dup", "C Allreduce"] + evaluation(rank, first) + evaluation(rank, last)
            calls += ["C Gather", "C Allreduce", "C Allgather"] + ["C Allgatherv"] * 4 + ["C Allreduce"]
            with open("{}.{}".format(prefix, rank), "w") as out:
                out.write("\n".join(calls) + "\n")
        table = subprocess.run([sys.executable, tool, prefix, "2"], check=True, capture_output=True,
                               text=True).stdout.splitlines()
    expected = ["| 1 | 0.0 / 0 | 0.0 / 0 |", "| 2 | 0.5 / 1 | 0.5 / 1 |", "| 3 | 1.0 / 1 | 1.0 / 1 |",
                "| 4 | 0.5 / 1 | 0.5 / 1 |", "| all | 1.0 / 1 (asked or sent to) | |"]
    if table[2:] != expected:
        print("trace_partners.py printed:\n" + "\n".join(table) + "\nexpected rows:\n" + "\n".join(expected))
        return 1
    print("trace_partners.py: the last walk's four stages found")
    return 0


sys.exit(main())
