#include <kfmm/comm/exchange_plan.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <functional>

namespace kfmm::detail {

void exchange_remote_bytes(MPI_Comm comm, int rank, MessageCounts const& counts, std::size_t bytes_per_element,
                           char const* send, char* recv, std::size_t max_message_bytes) {
  // Pieces of one message share a tag: MPI delivers messages of one sender, tag and
  // communicator in the order they were sent, so the pieces arrive in place.
  int const tag = 7301;
  std::vector<MPI_Request> requests;
  auto post = [&](bool receive, int peer, std::size_t offset, std::size_t count) {
    std::size_t const begin = offset * bytes_per_element, bytes = count * bytes_per_element;
    for (std::size_t piece = 0; piece < bytes; piece += max_message_bytes) {
      int const length = static_cast<int>(std::min(max_message_bytes, bytes - piece));
      requests.emplace_back();
      if (receive)
        MPI_Irecv(recv + begin + piece, length, MPI_BYTE, peer, tag, comm, &requests.back());
      else
        MPI_Isend(send + begin + piece, length, MPI_BYTE, peer, tag, comm, &requests.back());
    }
  };
  int const ranks = static_cast<int>(counts.send_counts.size());
  for (int peer = 0; peer < ranks; ++peer)
    if (peer != rank) post(true, peer, counts.recv_offsets[peer], counts.recv_counts[peer]);
  for (int peer = 0; peer < ranks; ++peer)
    if (peer != rank) post(false, peer, counts.send_offsets[peer], counts.send_counts[peer]);
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
}

std::string bad_destination_error(std::size_t element, int destination, int ranks) {
  if (destination >= ranks || destination < -1)
    return fmt::format("ExchangePlan: element {} has destination rank {}, outside [-1, {}); use a rank of the "
                       "communicator or -1 to drop the element",
                       element, destination, ranks);
  // The partner would not expect a count from this rank: the element is dropped, never sent.
  return fmt::format("ExchangePlan: element {} has destination rank {}, which is not a partner of the earlier "
                     "plan this one follows (reply_to: a rank that sent this one requests; within: a rank the "
                     "earlier plan sent to); send only to those ranks or -1 to drop the element",
                     element, destination);
}

namespace {

// The receiving side of a nonblocking consensus (NBX): hands every message of `tag` to
// `receive` as it arrives, enters a nonblocking barrier once this rank's synchronous `sends`
// are matched, and returns when the barrier completes (then every message has arrived).
void finish_consensus(MPI_Comm comm, int tag, std::vector<MPI_Request>& sends,
                      std::function<void(MPI_Status const&)> const& receive) {
  MPI_Request barrier = MPI_REQUEST_NULL;
  bool in_barrier = false;
  for (;;) {
    int arrived = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, tag, comm, &arrived, &status);
    if (arrived) {
      receive(status);
      continue;
    }
    int done = 0;
    if (!in_barrier) {
      MPI_Testall(static_cast<int>(sends.size()), sends.data(), &done, MPI_STATUSES_IGNORE);
      if (done) {
        MPI_Ibarrier(comm, &barrier);
        in_barrier = true;
      }
    } else {
      MPI_Test(&barrier, &done, MPI_STATUS_IGNORE);
      if (done) return;
    }
  }
}

}  // namespace

std::vector<std::size_t> import_counts(Context const& context, std::vector<std::size_t> const& export_counts) {
  int const ranks = context.size(), rank = context.rank();
  std::vector<std::size_t> imports(ranks, 0);
  imports[rank] = export_counts[rank];
  if (ranks == 1) return imports;
  // A rank can be at most one round ahead of another (it leaves a round only after every rank
  // entered its barrier), so two tags, alternating, keep consecutive rounds apart.
  int const tag = 7302 + static_cast<int>(context.next_round() % 2);
  MPI_Comm const comm = context.comm();
  std::vector<std::uint64_t> values;
  values.reserve(ranks);
  std::vector<MPI_Request> sends;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank || export_counts[peer] == 0) continue;
    values.push_back(export_counts[peer]);
    sends.emplace_back();
    MPI_Issend(&values.back(), 1, MPI_UINT64_T, peer, tag, comm, &sends.back());
  }
  finish_consensus(comm, tag, sends, [&](MPI_Status const& status) {
    std::uint64_t value = 0;
    MPI_Recv(&value, 1, MPI_UINT64_T, status.MPI_SOURCE, tag, comm, MPI_STATUS_IGNORE);
    imports[status.MPI_SOURCE] = static_cast<std::size_t>(value);
  });
  return imports;
}

std::vector<std::size_t> partner_import_counts(Context const& context, std::vector<std::size_t> const& export_counts,
                                               std::vector<std::size_t> const& send_to,
                                               std::vector<std::size_t> const& receive_from) {
  int const ranks = context.size(), rank = context.rank();
  std::vector<std::size_t> imports(ranks, 0);
  imports[rank] = export_counts[rank];
  // Every posted receive has exactly one matching send in this round and messages of one
  // sender and tag keep their order, so one fixed tag keeps consecutive rounds apart.
  int const tag = 7304;
  MPI_Comm const comm = context.comm();
  std::vector<std::uint64_t> sent(ranks, 0), received(ranks, 0);
  std::vector<MPI_Request> requests;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank || receive_from[peer] == 0) continue;
    requests.emplace_back();
    MPI_Irecv(&received[peer], 1, MPI_UINT64_T, peer, tag, comm, &requests.back());
  }
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank || send_to[peer] == 0) continue;
    sent[peer] = export_counts[peer];
    requests.emplace_back();
    MPI_Isend(&sent[peer], 1, MPI_UINT64_T, peer, tag, comm, &requests.back());
  }
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  for (int peer = 0; peer < ranks; ++peer)
    if (peer != rank && receive_from[peer] > 0) imports[peer] = static_cast<std::size_t>(received[peer]);
  return imports;
}

RowArrivals exchange_rows_with_counts(Context const& context, std::vector<std::size_t> const& send_counts,
                                      std::vector<std::size_t> const& send_offsets, std::size_t row_bytes,
                                      char const* send, std::function<char*(std::size_t)> const& room,
                                      std::vector<std::size_t> const* send_to,
                                      std::vector<std::size_t> const* receive_from) {
  int const ranks = context.size(), rank = context.rank();
  RowArrivals arrivals;
  arrivals.counts.assign(ranks, 0);
  arrivals.byte_offsets.assign(ranks, 0);
  if (ranks == 1) return arrivals;
  bool const consensus = send_to == nullptr;
  // NBX: two tags, alternating, keep consecutive rounds apart (a rank is at most one round
  // ahead). Known partners: every posted message has one receiver in this round, and the next
  // round's messages to this rank follow requests it has not sent yet.
  int const tag = consensus ? 7306 + static_cast<int>(context.next_round() % 2) : 7305;
  MPI_Comm const comm = context.comm();
  // Rows as one datatype: a message's count is its number of rows.
  MPI_Datatype row;
  MPI_Type_contiguous(static_cast<int>(row_bytes), MPI_BYTE, &row);
  MPI_Type_commit(&row);
  std::vector<MPI_Request> sends;
  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank || (consensus ? send_counts[peer] == 0 : (*send_to)[peer] == 0)) continue;
    sends.emplace_back();
    char const* rows = send + send_offsets[peer] * row_bytes;
    int const count = static_cast<int>(send_counts[peer]);
    if (consensus)
      MPI_Issend(rows, count, row, peer, tag, comm, &sends.back());
    else
      MPI_Isend(rows, count, row, peer, tag, comm, &sends.back());
  }
  std::size_t used = 0;
  auto const receive = [&](MPI_Status const& status) {
    int count = 0;
    MPI_Get_count(&status, row, &count);
    int const source = status.MPI_SOURCE;
    std::size_t const bytes = std::size_t(count) * row_bytes;
    char* const base = room(used + bytes);
    MPI_Recv(base + used, count, row, source, tag, comm, MPI_STATUS_IGNORE);
    arrivals.counts[source] = std::size_t(count);
    arrivals.byte_offsets[source] = used;
    used += bytes;
  };
  if (consensus) {
    finish_consensus(comm, tag, sends, receive);
  } else {
    int expected = 0;
    for (int peer = 0; peer < ranks; ++peer) expected += peer != rank && (*receive_from)[peer] > 0 ? 1 : 0;
    for (int k = 0; k < expected; ++k) {
      MPI_Status status;
      MPI_Probe(MPI_ANY_SOURCE, tag, comm, &status);
      receive(status);
    }
    MPI_Waitall(static_cast<int>(sends.size()), sends.data(), MPI_STATUSES_IGNORE);
  }
  MPI_Type_free(&row);
  return arrivals;
}

std::vector<std::size_t> offsets_of(std::vector<std::size_t> const& counts) {
  std::vector<std::size_t> offsets(counts.size() + 1, 0);
  for (std::size_t r = 0; r < counts.size(); ++r) offsets[r + 1] = offsets[r] + counts[r];
  return offsets;
}

}  // namespace kfmm::detail
