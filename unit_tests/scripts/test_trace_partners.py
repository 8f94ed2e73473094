#!/usr/bin/env python3
"""tools/trace_partners.py on synthetic tools/mpi_calls.c traces of two ranks and two evaluations,
laid out as kfmm's distributed evaluation calls them: the domain phase (its exchange holds a
consensus too), the top tree's Allgatherv followed by several Allreduces, walk levels of one
Allreduce and one consensus each (a level may send nothing), statistics after the walk. The
table must describe the second evaluation's walk, level by level, and rank 1's own lines its
stages' destinations.

  test_trace_partners.py SOURCE_DIR"""
import os
import subprocess
import sys
import tempfile


def evaluation(rank, levels, with_counts):
    """`with_counts`: requests and answers carry their counts (tags 7306/7307 and 7305) instead
    of a count message before the rows (7302/7303 and 7301)."""
    other = 1 - rank
    ask = "S {} {} 16".format(other, 7306 if with_counts else 7302)
    answer = "S {} {} 128".format(other, 7305 if with_counts else 7301)
    calls = ["C Allreduce", "C Allgather", "C Allgatherv"]  # bounds, splitter samples
    calls += ["C Allreduce"] * 3 + ["S {} 7302 8".format(other), "C Ibarrier", "S {} 7301 64".format(other)]
    calls += ["C Allreduce", "C Allgather", "C Allgatherv"]  # the top tree
    calls += ["C Allreduce"] * 3  # its agreement and the shared cells' allowances
    for asked, answered in levels:
        calls.append("C Allreduce")
        calls += [ask] if asked[rank] else []
        calls.append("C Ibarrier")
        calls += [answer] if answered[rank] else []
    return calls + ["C Allreduce"] * 5  # local stages agreed, statistics


def main():
    tool = os.path.join(sys.argv[1], "tools", "trace_partners.py")
    # (asks per rank, sends data per rank) for each level; the last level is the particle import.
    first = [((0, 0), (0, 0)), ((1, 1), (1, 1))]
    last = [((0, 0), (0, 0)), ((1, 0), (0, 1)), ((1, 1), (1, 1)), ((0, 1), (1, 0))]
    # With counts, a rank that asks also sends data (the requests ride in the consensus).
    expected = {False: ["| 1 | 0.0 / 0 | 0.0 / 0 |", "| 2 | 0.5 / 1 | 0.5 / 1 |", "| 3 | 1.0 / 1 | 1.0 / 1 |",
                        "| 4 | 0.5 / 1 | 0.5 / 1 |", "| all | 1.0 / 1 (asked or sent to) | |"],
                True: ["| 1 | 0.0 / 0 | 0.0 / 0 |", "| 2 | 0.5 / 1 | 1.0 / 1 |", "| 3 | 1.0 / 1 | 1.0 / 1 |",
                       "| 4 | 0.5 / 1 | 1.0 / 1 |", "| all | 1.0 / 1 (asked or sent to) | |"]}
    rank_one = {False: ["", "rank 1: 1 ranks asked or sent to in the walk", "  stage 1: asked 0 []; sent data 0 []",
                        "  stage 2: asked 0 []; sent data 1 [0]", "  stage 3: asked 1 [0]; sent data 1 [0]",
                        "  stage 4: asked 1 [0]; sent data 0 []"],
                True: ["", "rank 1: 1 ranks asked or sent to in the walk", "  stage 1: asked 0 []; sent data 0 []",
                       "  stage 2: asked 0 []; sent data 1 [0]", "  stage 3: asked 1 [0]; sent data 1 [0]",
                       "  stage 4: asked 1 [0]; sent data 1 [0]"]}
    for with_counts in (False, True):
        with tempfile.TemporaryDirectory() as work:
            prefix = os.path.join(work, "trace")
            for rank in (0, 1):
                calls = ["C Comm_dup", "C Allreduce"] + evaluation(rank, first, with_counts)
                calls += evaluation(rank, last, with_counts)
                calls += ["C Gather", "C Allreduce", "C Allgather"] + ["C Allgatherv"] * 4 + ["C Allreduce"]
                with open("{}.{}".format(prefix, rank), "w") as out:
                    out.write("\n".join(calls) + "\n")
            table = subprocess.run([sys.executable, tool, prefix, "2", "1"], check=True, capture_output=True,
                                   text=True).stdout.splitlines()
        if table[2:] != expected[with_counts] + rank_one[with_counts]:
            print("trace_partners.py (counts with the rows: {}) printed:\n".format(with_counts) + "\n".join(table) +
                  "\nexpected rows:\n" + "\n".join(expected[with_counts] + rank_one[with_counts]))
            return 1
    print("trace_partners.py: the last walk's four stages found, counts apart or with the rows; rank 1's stages")
    return 0


sys.exit(main())
