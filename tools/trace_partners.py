#!/usr/bin/env python3
"""Which stage of the last force evaluation sends to whom, from tools/mpi_calls.c traces
(MPI_CALLS_TRACE=PREFIX; run `kfmm bench --repeat 1 --samples 0` under it):

  tools/trace_partners.py PREFIX RANKS [RANK ...]

The last evaluation's walk starts after its top-tree Allgatherv (the last Allgatherv followed by
an Allreduce whose walk is found). Allreduces split the calls after it into segments; every walk
level (and the near-field particle import that ends the walk) is one segment holding the
nonblocking consensus's Ibarrier, so the walk is the first unbroken series of segments with an
Ibarrier: the Allreduces before it (the top tree's agreement, the shared cells' allowances) and
the ones after it (the local stages, the statistics) have none. Per stage it prints, over
ranks, the mean and largest number of
ranks asked (nonblocking-consensus messages: counts, or requests with their counts) and of ranks
sent data (requests and answers, with or without their counts), and the same for the whole walk.
Each RANK named after RANKS gets its own lines: per stage, the ranks it asked and sent data to
(to see which stage makes a rank's partners many)."""
import sys

# Tags of comm/exchange_plan.cpp: a consensus's counts (7302/7303, alternating rounds) or its
# rows with their counts (7306/7307) ask a rank; rows (7301), rows with their counts (7306/7307)
# and answers with their counts (7305) are data.
ASKED = (7302, 7303, 7306, 7307)
DATA = (7301, 7305, 7306, 7307)


def stages(path):
    events = [line.split() for line in open(path)]
    starts = [i + 1 for i in range(len(events) - 1)
              if events[i] == ["C", "Allgatherv"] and events[i + 1] == ["C", "Allreduce"]]
    for start in reversed(starts):  # the last that opens a walk (calls after the evaluations do not)
        found = walk(events, start)
        if found:
            return found
    return []


def walk(events, start):
    """The walk's stages after `start`: segments between Allreduces that hold an Ibarrier."""
    segments, current = [], None
    for event in events[start:]:
        if event[0] == "C":
            if event[1] == "Allreduce":
                current = {"asked": set(), "data": set(), "consensus": False}
                segments.append(current)
                continue
            if event[1] == "Ibarrier" and current is not None:
                current["consensus"] = True
                continue
            break  # another collective: past the walk (the next stage of the evaluation)
        if current is None:
            continue
        dest, tag = int(event[1]), int(event[2])
        if tag in ASKED:
            current["asked"].add(dest)
        if tag in DATA:
            current["data"].add(dest)
    result = []
    for segment in segments:
        if segment["consensus"]:
            result.append(segment)
        elif result:
            break
    # One consensus segment alone is the domain exchange after the splitters' Allgatherv.
    return result if len(result) > 1 else []


prefix, ranks = sys.argv[1], int(sys.argv[2])
shown = [int(r) for r in sys.argv[3:]]
for r in shown:
    if not 0 <= r < ranks:
        sys.exit("trace_partners.py: rank {} is not one of the {} ranks (0 to {}); name ranks below RANKS".format(
            r, ranks, ranks - 1))
per_rank = [stages("{}.{}".format(prefix, r)) for r in range(ranks)]
levels = max(len(s) for s in per_rank)
print("| stage | ranks asked (mean / max) | ranks sent data (mean / max) |")
print("|---|---|---|")
for level in range(levels):
    asked = [len(s[level]["asked"]) if level < len(s) else 0 for s in per_rank]
    data = [len(s[level]["data"]) if level < len(s) else 0 for s in per_rank]
    print("| {} | {:.1f} / {} | {:.1f} / {} |".format(level + 1, sum(asked) / ranks, max(asked), sum(data) / ranks,
                                                       max(data)))
union = [set().union(*[x["asked"] | x["data"] for x in s]) if s else set() for s in per_rank]
print("| all | {:.1f} / {} (asked or sent to) | |".format(sum(len(u) for u in union) / ranks, max(len(u) for u in union)))
for r in shown:
    s = per_rank[r]
    print("\nrank {}: {} ranks asked or sent to in the walk".format(r, len(union[r])))
    for level, x in enumerate(s):
        print("  stage {}: asked {} {}; sent data {} {}".format(level + 1, len(x["asked"]), sorted(x["asked"]),
                                                            len(x["data"]), sorted(x["data"])))
