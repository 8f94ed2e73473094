#!/usr/bin/env python3
"""Which stage of the last force evaluation sends to whom, from tools/mpi_calls.c traces
(MPI_CALLS_TRACE=PREFIX; run `kfmm bench --repeat 1 --samples 0` under it):

  tools/trace_partners.py PREFIX RANKS

The last evaluation's walk starts after its top-tree Allgatherv (the last Allgatherv followed by
an Allreduce and by messages) and ends at the first three Allreduces in a row (the agreement of the local stages
and the statistics). Each Allreduce in between starts a stage: a walk level (the last one is the
near-field particle import). Per stage it prints, over ranks, the mean and largest number of
ranks asked (nonblocking-consensus counts, tags 7302/7303) and of ranks sent data (tag 7301,
answers included), and the same for the whole walk."""
import sys


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
    result, current = [], None
    run = 0
    for event in events[start:]:
        if event[0] == "C":
            if event[1] == "Allreduce":
                run += 1
                if run == 3:
                    break
                current = {"asked": set(), "data": set()}
                result.append(current)
            else:
                run = 0
            continue
        run = 0
        dest, tag = int(event[1]), int(event[2])
        if tag in (7302, 7303):
            current["asked"].add(dest)
        elif tag == 7301:
            current["data"].add(dest)
    return [s for s in result if s["asked"] or s["data"]]


prefix, ranks = sys.argv[1], int(sys.argv[2])
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
