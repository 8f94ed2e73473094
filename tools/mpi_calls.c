/* Counts MPI calls per rank through the PMPI profiling interface and prints them at
 * MPI_Finalize: collectives by name, point-to-point messages, their bytes and partners, and the
 * bytes this rank sends to the others in gathers and all-to-alls (collective_bytes). For
 * measuring what a kfmm run costs in communication independently of the cores (README,
 * "Distributed"). Build and use:
 *   mpicc -shared -fPIC -O2 -o /tmp/libmpi_calls.so tools/mpi_calls.c
 *   mpirun -np 4 -x LD_PRELOAD=/tmp/libmpi_calls.so build/apps/kfmm bench ...
 * Each rank prints one line "mpi_calls rank R: name=count ..." to stderr, ending with the messages
 * per destination ("to=dest:count,..."). With MPI_CALLS_TRACE=PREFIX each rank also writes its
 * calls in order to PREFIX.RANK: "C name" per collective, "S dest tag bytes" per message (to see
 * which stage of an evaluation sends to whom). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ALLREDUCE, ALLTOALL, ALLTOALLV, ALLGATHER, ALLGATHERV, BCAST, BARRIER, IBARRIER, EXSCAN, SCAN, REDUCE, GATHER,
       SPLIT, DUP, COLLECTIVES };
static char const* names[COLLECTIVES] = {"Allreduce", "Alltoall", "Alltoallv", "Allgather", "Allgatherv", "Bcast",
                                         "Barrier", "Ibarrier", "Exscan", "Scan", "Reduce", "Gather", "Comm_split", "Comm_dup"};
static long long calls[COLLECTIVES];
static long long messages, bytes;
/* Bytes this rank contributes to the gathers and all-to-alls (what it sends to the others). */
static long long collective_bytes;

static void contributed(int count, MPI_Datatype type, MPI_Comm comm, int per_other) {
  int size = 0, ranks = 1;
  PMPI_Type_size(type, &size);
  PMPI_Comm_size(comm, &ranks);
  collective_bytes += (long long)count * size * (per_other ? ranks - 1 : 1);
}
/* Messages sent to each destination rank (the difference of two runs gives the partners of
 * the evaluations or steps between them). */
static long long partner[1 << 16];

static FILE* trace_file;
static int trace_state; /* 0: not looked at yet, 1: tracing, 2: off */

static FILE* tracing(void) {
  if (trace_state == 0) {
    char const* prefix = getenv("MPI_CALLS_TRACE");
    int rank = 0;
    char name[4096];
    trace_state = 2;
    if (prefix && *prefix) {
      PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
      snprintf(name, sizeof(name), "%s.%d", prefix, rank);
      trace_file = fopen(name, "w");
      if (trace_file) trace_state = 1;
    }
  }
  return trace_state == 1 ? trace_file : NULL;
}

static void collective(int which);

static void sent(int count, MPI_Datatype type, int dest, int tag) {
  int size = 0;
  PMPI_Type_size(type, &size);
  if (tracing()) fprintf(trace_file, "S %d %d %lld\n", dest, tag, (long long)count * size);
  ++messages;
  bytes += (long long)count * size;
  if (dest >= 0 && dest < (int)(sizeof(partner) / sizeof(partner[0]))) ++partner[dest];
}

static void collective(int which) {
  ++calls[which];
  if (tracing()) fprintf(trace_file, "C %s\n", names[which]);
}

int MPI_Allreduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m) {
  collective(ALLREDUCE);
  return PMPI_Allreduce(s, r, c, t, o, m);
}
int MPI_Alltoall(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm m) {
  collective(ALLTOALL);
  contributed(sc, st, m, 1);
  return PMPI_Alltoall(s, sc, st, r, rc, rt, m);
}
int MPI_Alltoallv(const void* s, const int* sc, const int* sd, MPI_Datatype st, void* r, const int* rc,
                  const int* rd, MPI_Datatype rt, MPI_Comm m) {
  collective(ALLTOALLV);
  {
    int ranks = 1, me = 0;
    PMPI_Comm_size(m, &ranks);
    PMPI_Comm_rank(m, &me);
    for (int r = 0; r < ranks; ++r)
      if (r != me) contributed(sc[r], st, m, 0);
  }
  return PMPI_Alltoallv(s, sc, sd, st, r, rc, rd, rt, m);
}
int MPI_Allgather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm m) {
  collective(ALLGATHER);
  contributed(sc, st, m, 1);
  return PMPI_Allgather(s, sc, st, r, rc, rt, m);
}
int MPI_Allgatherv(const void* s, int sc, MPI_Datatype st, void* r, const int* rc, const int* d, MPI_Datatype rt,
                   MPI_Comm m) {
  collective(ALLGATHERV);
  contributed(sc, st, m, 1);
  return PMPI_Allgatherv(s, sc, st, r, rc, d, rt, m);
}
int MPI_Bcast(void* b, int c, MPI_Datatype t, int root, MPI_Comm m) {
  collective(BCAST);
  return PMPI_Bcast(b, c, t, root, m);
}
int MPI_Barrier(MPI_Comm m) {
  collective(BARRIER);
  return PMPI_Barrier(m);
}
int MPI_Ibarrier(MPI_Comm m, MPI_Request* q) {
  collective(IBARRIER);
  return PMPI_Ibarrier(m, q);
}
int MPI_Exscan(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m) {
  collective(EXSCAN);
  return PMPI_Exscan(s, r, c, t, o, m);
}
int MPI_Scan(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m) {
  collective(SCAN);
  return PMPI_Scan(s, r, c, t, o, m);
}
int MPI_Reduce(const void* s, void* r, int c, MPI_Datatype t, MPI_Op o, int root, MPI_Comm m) {
  collective(REDUCE);
  return PMPI_Reduce(s, r, c, t, o, root, m);
}
int MPI_Gather(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, int root, MPI_Comm m) {
  collective(GATHER);
  return PMPI_Gather(s, sc, st, r, rc, rt, root, m);
}
int MPI_Comm_split_type(MPI_Comm m, int type, int key, MPI_Info info, MPI_Comm* out) {
  collective(SPLIT);
  return PMPI_Comm_split_type(m, type, key, info, out);
}
int MPI_Comm_split(MPI_Comm m, int color, int key, MPI_Comm* out) {
  collective(SPLIT);
  return PMPI_Comm_split(m, color, key, out);
}
int MPI_Comm_dup(MPI_Comm m, MPI_Comm* out) {
  collective(DUP);
  return PMPI_Comm_dup(m, out);
}
int MPI_Isend(const void* b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm m, MPI_Request* q) {
  sent(c, t, dest, tag);
  return PMPI_Isend(b, c, t, dest, tag, m, q);
}
int MPI_Issend(const void* b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm m, MPI_Request* q) {
  sent(c, t, dest, tag);
  return PMPI_Issend(b, c, t, dest, tag, m, q);
}
int MPI_Send(const void* b, int c, MPI_Datatype t, int dest, int tag, MPI_Comm m) {
  sent(c, t, dest, tag);
  return PMPI_Send(b, c, t, dest, tag, m);
}

int MPI_Finalize(void) {
  int rank = 0, partners = 0;
  long long collectives = 0;
  char line[1024], to[4096];
  int at = 0, to_at = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  to[0] = '\0';
  for (unsigned i = 0; i < sizeof(partner) / sizeof(partner[0]); ++i)
    if (partner[i] > 0) {
      ++partners;
      if (to_at < (int)sizeof(to) - 32) to_at += snprintf(to + to_at, sizeof(to) - to_at, "%s%u:%lld", to_at ? "," : "", i, partner[i]);
    }
  for (int i = 0; i < COLLECTIVES; ++i) {
    collectives += i < SPLIT ? calls[i] : 0;
    if (calls[i] > 0) at += snprintf(line + at, sizeof(line) - at, " %s=%lld", names[i], calls[i]);
  }
  fprintf(stderr,
          "mpi_calls rank %d: collectives=%lld%s messages=%lld bytes=%lld partners=%d collective_bytes=%lld to=%s\n",
          rank, collectives, line, messages, bytes, partners, collective_bytes, to);
  if (trace_file) fclose(trace_file);
  return PMPI_Finalize();
}
