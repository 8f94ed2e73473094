#pragma once
/// \file
/// \brief A reusable all-to-all communication plan (Cabana's Distributor idea, ArborX's
/// staging): built once from a destination rank per element, then used for every payload.
#include <kfmm/build_config.hpp>
#include <kfmm/comm/context.hpp>
#include <kfmm/comm/export_order.hpp>
#include <kfmm/comm/packed_rows.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/host_device_bytes.hpp>
#include <kfmm/core/session_scratch.hpp>
#include <kfmm/core/view_growth.hpp>
#include <kfmm/core/space_copy.hpp>
#include <kfmm/core/sort.hpp>
#include <kfmm/core/types.hpp>

#include <algorithm>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace kfmm {

namespace detail {

/// \brief Element counts and offsets per peer rank of one direction of a plan.
struct MessageCounts {
  std::vector<std::size_t> send_counts, send_offsets;  // offsets have size() + 1 entries
  std::vector<std::size_t> recv_counts, recv_offsets;
};

/// \brief Sends and receives the remote (non-self) messages of `counts` with Isend/Irecv/Waitall,
/// each message cut into pieces of at most `max_message_bytes` bytes so that messages of any
/// size fit MPI's int counts. `send` and `recv` must be accessible to MPI. Collective.
void exchange_remote_bytes(MPI_Comm comm, int rank, MessageCounts const& counts, std::size_t bytes_per_element,
                           char const* send, char* recv, std::size_t max_message_bytes);

/// The error for element `element` whose destination rank `destination` is outside [−1, ranks)
/// or not a partner of the earlier plan a reply_to()/within() plan follows.
std::string bad_destination_error(std::size_t element, int destination, int ranks);

/// Exchanges export counts for import counts: a nonblocking consensus (NBX, Hoefler, Siebert
/// and Lumsdaine 2010): a synchronous send to each rank this one exports to, receives of
/// whatever arrives, and a nonblocking barrier entered once this rank's sends are matched; when
/// it completes, every count has arrived. Messages go to partners only and the collective part
/// is one barrier (log R latency), where an Alltoall of counts costs O(R). Collective.
std::vector<std::size_t> import_counts(Context const& context, std::vector<std::size_t> const& export_counts);

/// Exchanges export counts for import counts between partners known in advance: one count
/// (possibly zero) to each other rank r with send_to[r] > 0, one from each other rank r with
/// receive_from[r] > 0, point to point (Isend/Irecv/Waitall; no barrier, no collective). The
/// partner sets must match across ranks (r's send_to names this rank exactly when this rank's
/// receive_from names r), as they do for the answers to a plan's messages: send_to = its
/// import counts, receive_from = its export counts. Exports to ranks outside send_to must be
/// zero. Collective over the partners only.
std::vector<std::size_t> partner_import_counts(Context const& context, std::vector<std::size_t> const& export_counts,
                                               std::vector<std::size_t> const& send_to,
                                               std::vector<std::size_t> const& receive_from);

/// Exclusive prefix sums with the total as last entry.
std::vector<std::size_t> offsets_of(std::vector<std::size_t> const& counts);

/// Where the messages of exchange_rows_with_counts() landed: rows per source rank (zero for
/// self and for ranks that sent nothing) and each source's first byte in the arrival buffer.
struct RowArrivals {
  std::vector<std::size_t> counts;
  std::vector<std::size_t> byte_offsets;
};

/// \brief Sends rows whose counts travel with them: one message per partner holding all its
/// rows (`row_bytes` each, rows [send_offsets[r], send_offsets[r + 1]) of `send` for rank r), so
/// that a receiver learns a count from the message's size instead of from a message of its own.
/// Partners unknown in advance (`send_to` null): a nonblocking consensus as import_counts()
/// does, with the rows in the synchronous sends (ranks without rows get no message). Partners
/// known (`send_to` / `receive_from` as for partner_import_counts()): a message, possibly empty,
/// to each rank in `send_to` and one from each rank in `receive_from`, no barrier. Messages are
/// received in arrival order into the buffer `room(bytes)` returns (at least `bytes` long, its
/// earlier bytes kept). Messages of more than INT_MAX rows are not supported (kfmm's walk sends
/// int-indexed rows). Collective (NBX) or over the partners (known).
RowArrivals exchange_rows_with_counts(Context const& context, std::vector<std::size_t> const& send_counts,
                                      std::vector<std::size_t> const& send_offsets, std::size_t row_bytes,
                                      char const* send, std::function<char*(std::size_t)> const& room,
                                      std::vector<std::size_t> const* send_to,
                                      std::vector<std::size_t> const* receive_from);

/// A View of `rows` rows shaped like `View` (rank 1, or rank 2 with `width` columns), zeroed.
template <class View>
View allocate_rows(std::string const& label, std::size_t rows, std::size_t width) {
  if constexpr (View::rank_dynamic == 2) {
    return View(label, rows, width);
  } else {
    (void)width;
    return View(label, rows);
  }
}

/// \brief Byte buffers kept for the life of the Kokkos session and grown on demand, so that
/// repeated exchanges allocate nothing: device send/receive buffers and their page-locked host
/// staging copies. Slot `which` (0: send, 1: receive, 2: messages in arrival order, 3: the
/// sources of exchange_arranged()'s rows) of `Space`. Released at Kokkos::finalize.
template <class Space>
struct ReusableBuffers {
  Kokkos::View<char*, Space> buffers[4];
};
template <class Space>
Kokkos::View<char*, Space> reusable_buffer(int which, std::size_t bytes) {
  auto& buffer = session_scratch<ReusableBuffers<Space>>().buffers[which];
  grow_discarding(buffer, bytes, "kfmm::exchange_plan::buffer");
  return buffer;
}

/// Frees the slots of `Space`; the next request allocates what it needs.
template <class Space>
void release_reusable_buffers() {
  auto& scratch = session_scratch<ReusableBuffers<Space>>();
  for (auto& buffer : scratch.buffers) buffer = Kokkos::View<char*, Space>();
}

/// Slot `which` of `Space` holding at least `bytes`, its first `kept` bytes kept.
template <class Space>
Kokkos::View<char*, Space> reusable_buffer_keeping(int which, std::size_t bytes, std::size_t kept) {
  auto& buffer = session_scratch<ReusableBuffers<Space>>().buffers[which];
  if (buffer.extent(0) == 0) buffer = Kokkos::View<char*, Space>("kfmm::exchange_plan::buffer", 0);
  grow_appending(buffer, bytes, kept);
  return buffer;
}

/// `count` elements of type T at the start of a reusable byte buffer.
template <class T, class Space>
Kokkos::View<T*, Space, Kokkos::MemoryUnmanaged> typed_buffer(int which, std::size_t count) {
  auto const bytes = reusable_buffer<Space>(which, count * sizeof(T) + 1);
  return Kokkos::View<T*, Space, Kokkos::MemoryUnmanaged>(reinterpret_cast<T*>(bytes.data()), count);
}

/// Forward: send slot j takes element order(j); reverse: slot j takes row j. The kernels are
/// free functions because nvcc allows device lambdas only there and in public member functions.
template <class ExecutionSpace, class Source, class Order, class Buffer>
void pack_rows(ExecutionSpace const& space, Source const& source, Order const& order, bool forward,
               std::size_t width, std::size_t begin, std::size_t end, Buffer const& send) {
  if (end <= begin) return;
  Kokkos::parallel_for(
      "kfmm::exchange_plan::pack", Kokkos::RangePolicy<ExecutionSpace>(space, begin, end), KOKKOS_LAMBDA(std::size_t j) {
        std::size_t const row = forward ? order(j) : j;
        for (std::size_t c = 0; c < width; ++c) send(j * width + c) = element(source, row, c);
      });
}

/// Forward: received slot i is row i; reverse: received slot i lands on element order(i).
template <class ExecutionSpace, class Target, class Order, class Buffer>
void unpack_rows(ExecutionSpace const& space, Buffer const& recv, Order const& order, bool forward,
                 std::size_t width, std::size_t begin, std::size_t end, Target const& target) {
  if (end <= begin) return;
  Kokkos::parallel_for(
      "kfmm::exchange_plan::unpack", Kokkos::RangePolicy<ExecutionSpace>(space, begin, end),
      KOKKOS_LAMBDA(std::size_t i) {
        std::size_t const row = forward ? i : order(i);
        for (std::size_t c = 0; c < width; ++c) element(target, row, c) = recv(i * width + c);
      });
}

/// Rows [source_begin, source_begin + count) of `source` into rows from `target_begin` of
/// `target` (two Views that do not overlap).
template <class ExecutionSpace, class Source, class Target>
void copy_rows(ExecutionSpace const& space, Source const& source, std::size_t source_begin, Target const& target,
               std::size_t target_begin, std::size_t width, std::size_t count) {
  Kokkos::parallel_for(
      "kfmm::exchange_plan::self_rows", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t j) {
        for (std::size_t c = 0; c < width; ++c) element(target, target_begin + j, c) = element(source, source_begin + j, c);
      });
}

/// Rows [source_begin, source_begin + count) of `source` into buffer slots from `slot_begin`.
template <class ExecutionSpace, class Source, class Buffer>
void pack_run(ExecutionSpace const& space, Source const& source, std::size_t source_begin, std::size_t width,
              std::size_t count, Buffer const& buffer, std::size_t slot_begin) {
  Kokkos::parallel_for(
      "kfmm::exchange_plan::pack_self_rows", Kokkos::RangePolicy<ExecutionSpace>(space, 0, count),
      KOKKOS_LAMBDA(std::size_t j) {
        for (std::size_t c = 0; c < width; ++c) buffer((slot_begin + j) * width + c) = element(source, source_begin + j, c);
      });
}

/// Whether two Views are the same rows in memory (1), lie apart (0), or overlap otherwise (−1).
template <class A, class B>
int aliasing(A const& a, B const& b) {
  auto const* a0 = reinterpret_cast<char const*>(a.data());
  auto const* b0 = reinterpret_cast<char const*>(b.data());
  std::size_t const a_bytes = a.span() * sizeof(typename A::value_type);
  std::size_t const b_bytes = b.span() * sizeof(typename B::value_type);
  if (a_bytes == 0 || b_bytes == 0 || a0 + a_bytes <= b0 || b0 + b_bytes <= a0) return 0;
  bool same = a0 == b0 && a.extent(0) == b.extent(0) && a.span() == b.span();
  for (int r = 0; same && r < int(A::rank); ++r) same = a.stride(r) == b.stride(r);
  return same ? 1 : -1;
}

}  // namespace detail

/// \brief Frees the byte buffers every exchange reuses (device and host staging): after an
/// exchange far larger than the ones that follow (a first decomposition of particles in file
/// order moves most of them), so that its buffers are not held for the rest of the run. The next
/// exchange allocates what it needs. Not while an exchange is under way.
template <class Memory = MemorySpace>
void release_exchange_buffers() {
  detail::release_reusable_buffers<Memory>();
  detail::release_reusable_buffers<compat::StagingSpace>();
}

/// \brief Who sends which elements to whom, computed once and reused for every payload.
///
/// Element i of this rank goes to rank `destinations[i]` (−1 drops it). Exports are ordered by
/// destination rank, keeping the elements' relative order; imports are ordered by source rank,
/// then by their order on the source. exchange() moves payloads forward, reverse() sends
/// payloads of the imported elements back to where they came from, in the original order.
/// Self-messages are local copies. Device memory goes to MPI directly only when kfmm is built
/// with KFMM_ENABLE_GPU_AWARE_MPI; otherwise only the remote slices are staged through host.
template <class Memory = MemorySpace>
class ExchangePlan {
 public:
  using memory_space = Memory;
  using execution_space = typename Memory::execution_space;

  ExchangePlan() = default;

  /// \brief Builds the plan for the first `n` entries of `destinations` (each in [−1, ranks)).
  /// Messages are cut into pieces of at most `max_message_bytes` bytes. Collective; a bad
  /// destination on any rank makes every rank throw kfmm::Error.
  ExchangePlan(Context const& context, Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
               std::size_t max_message_bytes = INT_MAX)
      : ExchangePlan(context, destinations, n, max_message_bytes, nullptr) {}

  /// \brief The same plan without the two agreements of the checks (an Allreduce each): for
  /// callers inside a stage that agrees its errors in a later collective of its own. A bad
  /// destination drops its element and a too large `n` is cut to the destinations given; both
  /// are reported in `deferred_error` (left as it is otherwise), which the caller must agree.
  ExchangePlan(Context const& context, Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
               std::string& deferred_error, std::size_t max_message_bytes = INT_MAX)
      : ExchangePlan(context, destinations, n, max_message_bytes, &deferred_error) {}

  /// \brief The plan of the answers to `requests` (a plan of the same communicator): element i
  /// goes to rank destinations[i], which must be a rank that sent this one requests along
  /// `requests` (or −1). No consensus: the counts travel point to point between the partners
  /// `requests` already knows — one count to each rank that asked this one, one from each rank
  /// this one asked, possibly zero — so an answer costs no barrier and no collective. A bad
  /// destination (outside [−1, ranks) or a rank that did not ask) drops its element: here all
  /// ranks agree on it and throw kfmm::Error (one Allreduce); with `deferred_error` it is
  /// reported there for the caller to agree, as the deferred-check constructor does. The counts
  /// still go to every partner, so no rank waits for one.
  static ExchangePlan reply_to(Context const& context, ExchangePlan const& requests,
                               Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
                               std::size_t max_message_bytes = INT_MAX) {
    return ExchangePlan(context, destinations, n, max_message_bytes, nullptr, &requests, true);
  }
  static ExchangePlan reply_to(Context const& context, ExchangePlan const& requests,
                               Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
                               std::string& deferred_error, std::size_t max_message_bytes = INT_MAX) {
    return ExchangePlan(context, destinations, n, max_message_bytes, &deferred_error, &requests, true);
  }

  /// \brief A plan in the direction of `earlier` whose destinations are among the ranks
  /// `earlier` exports to (e.g. some of the rows it sent, sent again): counts travel point to
  /// point between `earlier`'s partners as in reply_to(), with the same checks and errors.
  static ExchangePlan within(Context const& context, ExchangePlan const& earlier,
                             Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
                             std::size_t max_message_bytes = INT_MAX) {
    return ExchangePlan(context, destinations, n, max_message_bytes, nullptr, &earlier, false);
  }
  static ExchangePlan within(Context const& context, ExchangePlan const& earlier,
                             Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
                             std::string& deferred_error, std::size_t max_message_bytes = INT_MAX) {
    return ExchangePlan(context, destinations, n, max_message_bytes, &deferred_error, &earlier, false);
  }

  /// \brief The deferred-check plan and its one exchange in one step, for a payload that goes
  /// once (a walk level's requests): each partner gets one message holding its rows, and its
  /// count travels with them (the receiver reads it from the message's size), so the exchange
  /// costs one message per partner instead of a count and then the rows. `imports(rows)` is
  /// called once the import count is known and returns the View (rank 1 or (n, k), the columns
  /// of `exports`, at least `rows` rows) that receives the imports in import order. The plan
  /// keeps its counts and order: reply_to() and within() plans can follow it, and further
  /// exchanges along it. Errors as in the deferred-check constructor.
  template <class ExportView, class Imports>
  static ExchangePlan send_once(Context const& context, Kokkos::View<int const*, Memory> const& destinations,
                                std::size_t n, ExportView const& exports, Imports const& imports,
                                std::string& deferred_error) {
    ExchangePlan plan(context, destinations, n, INT_MAX, &deferred_error, nullptr, false, true);
    plan.send_with_counts(exports, imports, nullptr, nullptr);
    return plan;
  }

  /// \brief reply_to() (deferred checks) and its one exchange in one step: one message, possibly
  /// empty, to each rank that asked along `requests`, holding its rows; one from each rank asked.
  /// `imports` as for send_once().
  template <class ExportView, class Imports>
  static ExchangePlan reply_once(Context const& context, ExchangePlan const& requests,
                                 Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
                                 ExportView const& exports, Imports const& imports, std::string& deferred_error) {
    ExchangePlan plan(context, destinations, n, INT_MAX, &deferred_error, &requests, true, true);
    plan.send_with_counts(exports, imports, &requests.counts_.recv_counts, &requests.counts_.send_counts);
    return plan;
  }

 private:
  // `known`, when given, is the earlier plan whose partners carry the counts: its sources
  // (`answering`) or its destinations; errors are agreed in one Allreduce then.
  // `with_data`: the import counts are left for send_with_counts(), which learns them from the
  // messages.
  ExchangePlan(Context const& context, Kokkos::View<int const*, Memory> const& destinations, std::size_t n,
               std::size_t max_message_bytes, std::string* deferred_error, ExchangePlan const* known = nullptr,
               bool answering = false, bool with_data = false)
      : context_(std::make_shared<Context const>(context)), comm_(context.comm()), rank_(context.rank()), num_elements_(n),
        max_message_bytes_(max_message_bytes) {
    if (max_message_bytes == 0 || max_message_bytes > std::size_t(INT_MAX))
      fail("ExchangePlan: max_message_bytes = {} must be in [1, {}]", max_message_bytes, INT_MAX);
    std::vector<std::size_t> const* send_to = nullptr;
    std::vector<std::size_t> const* receive_from = nullptr;
    if (known != nullptr) {
      send_to = answering ? &known->counts_.recv_counts : &known->counts_.send_counts;
      receive_from = answering ? &known->counts_.send_counts : &known->counts_.recv_counts;
      // A programming error, the same on every rank that makes it (a default or foreign plan).
      if (send_to->size() != std::size_t(context.size()) || known->comm_ != comm_)
        fail("ExchangePlan: the earlier plan given to {} was not built on this communicator of {} ranks",
             answering ? "reply_to" : "within", context.size());
    }
    std::string error;
    if (destinations.extent(0) < n)
      error = fmt::format("ExchangePlan: n = {} exceeds the {} destinations given", n, destinations.extent(0));
    bool const agree_once = known != nullptr && deferred_error == nullptr;
    std::string* const report = agree_once ? &error : deferred_error;
    if (deferred_error == nullptr && !agree_once) {
      agree_on_error(context, error);
    } else if (!error.empty()) {
      if (report != &error && report->empty()) *report = error;
      num_elements_ = n = destinations.extent(0);
    }
    // The export order is sorted on the plan's memory space; only the R counts come back.
    auto const built = detail::build_export_order(execution_space(), destinations, n, context.size(), rank_, send_to,
                                                  export_order_);
    std::string const bad = built.first_bad == detail::no_element
                                ? std::string()
                                : detail::bad_destination_error(built.first_bad, built.bad_destination, context.size());
    if (report == nullptr)
      agree_on_error(context, bad);
    else if (!bad.empty() && report->empty())
      *report = bad;
    counts_.send_counts = built.counts;
    self_first_ = built.self_first;
    if (with_data) {
      counts_.send_offsets = detail::offsets_of(counts_.send_counts);
      return;
    }
    if (known != nullptr) {
      counts_.recv_counts = detail::partner_import_counts(context, counts_.send_counts, *send_to, *receive_from);
      if (agree_once) agree_on_error(context, error);
    } else {
      counts_.recv_counts = detail::import_counts(context, counts_.send_counts);
    }
    counts_.send_offsets = detail::offsets_of(counts_.send_counts);
    counts_.recv_offsets = detail::offsets_of(counts_.recv_counts);
  }

 public:

  /// Number of elements the plan was built for (rows of exports; rows returned by reverse()).
  std::size_t num_elements() const { return num_elements_; }
  /// Elements sent, self included, drops excluded.
  std::size_t num_export() const { return counts_.send_offsets.empty() ? 0 : counts_.send_offsets.back(); }
  /// Elements received, self included.
  std::size_t num_import() const { return counts_.recv_offsets.empty() ? 0 : counts_.recv_offsets.back(); }
  /// Elements received from each rank; imports from rank r start at import_offsets()[r].
  std::vector<std::size_t> const& import_counts() const { return counts_.recv_counts; }
  std::vector<std::size_t> const& import_offsets() const { return counts_.recv_offsets; }
  std::vector<std::size_t> const& export_counts() const { return counts_.send_counts; }
  /// \brief This plan's partners and counts without its element order (a few numbers per rank
  /// instead of one index per element): enough to build reply_to() and within() plans on it
  /// later, not to move data (exchange and reverse throw kfmm::Error).
  ExchangePlan counts_only() const {
    ExchangePlan copy;
    copy.context_ = context_;
    copy.comm_ = comm_;
    copy.rank_ = rank_;
    copy.counts_ = counts_;
    copy.counts_only_ = true;
    return copy;
  }
  /// Bytes sent to and received from other ranks (self excluded) by the last exchange or reverse.
  std::size_t bytes_sent() const { return bytes_sent_; }
  std::size_t bytes_received() const { return bytes_received_; }

  /// \brief Sends rows of `exports` (≥ num_elements() rows, rank 1 or (n, k)) along the plan
  /// into a new View of num_import() rows.
  template <class View>
  typename View::non_const_type exchange(View const& exports) const {
    auto imports = detail::allocate_rows<typename View::non_const_type>("kfmm::exchange_plan::imports",
                                                                         num_import(), detail::columns(exports));
    exchange(exports, imports);
    return imports;
  }

  /// Sends rows of `exports` into the first num_import() rows of `imports`. The two may be the
  /// same View (all rows are packed before any is written), e.g. to exchange particles in place.
  template <class ExportView, class ImportView>
  void exchange(ExportView const& exports, ImportView const& imports) const {
    check_rows(exports, num_elements_, "exports");
    check_rows(imports, num_import(), "imports");
    transfer(exports, imports, true);
  }

  /// \brief Sends rows of `imports` (≥ num_import() rows, in import order) back to their source
  /// ranks, into a new View of num_elements() rows in the original element order; rows of
  /// dropped elements are zero.
  template <class View>
  typename View::non_const_type reverse(View const& imports) const {
    auto exports = detail::allocate_rows<typename View::non_const_type>("kfmm::exchange_plan::returned",
                                                                         num_elements_, detail::columns(imports));
    reverse(imports, exports);
    return exports;
  }

  /// Sends rows of `imports` back into `exports` (rows of dropped elements are left untouched).
  template <class ImportView, class ExportView>
  void reverse(ImportView const& imports, ExportView const& exports) const {
    check_rows(imports, num_import(), "imports");
    check_rows(exports, num_elements_, "exports");
    transfer(imports, exports, false);
  }

  /// \brief Sends rows of several Views (e.g. every field of the particles) along the plan in
  /// place: afterwards the first num_import() rows of each hold the imports. The fields of a
  /// row to or from another rank travel together in one record (one message per partner; the
  /// buffers hold those rows alone). The rows that stay are not copied when they form one run
  /// (particles sorted by key and cut into key ranges) that keeps its place, moved in place
  /// (each row read and written once) when the run moves, and gathered field by field through
  /// a buffer otherwise. Every View needs max(num_elements(), num_import()) rows; the Views
  /// must not overlap one another.
  template <class... Views>
  void exchange_in_place(Views const&... views) const {
    static_assert(sizeof...(Views) > 0, "exchange_in_place needs at least one View");
    std::size_t const rows = num_elements_ > num_import() ? num_elements_ : num_import();
    (check_rows(views, rows, "in-place"), ...);
    check_usable();
    check_apart(views...);
    std::size_t offsets[sizeof...(Views)];
    std::size_t align = 1;
    std::size_t const record = record_layout(offsets, align, views...);
    int const self = rank_;
    detail::MessageCounts const remote = remote_counts();
    std::size_t field = 0;
    std::size_t const num_send = counts_.send_offsets.back(), num_recv = counts_.recv_offsets.back();
    std::size_t const send_self = counts_.send_offsets[self], send_self_end = counts_.send_offsets[self + 1];
    std::size_t const recv_self = counts_.recv_offsets[self], recv_self_end = counts_.recv_offsets[self + 1];
    std::size_t const stay = send_self_end - send_self;
    execution_space space;
    std::size_t const target_chunks = 4 * std::size_t(space.concurrency());
    // The save area of the in-place move (or the staying rows of one field when they form no
    // run) follows the records to send, in the same buffer.
    bool const run = self_first_ != no_run;
    std::size_t save_bytes = 0;
    if (!run) {
      ((save_bytes = std::max(save_bytes, stay * detail::columns(views) * sizeof(typename Views::value_type))), ...);
    } else if (self_first_ != recv_self) {
      std::size_t const distance = self_first_ > recv_self ? self_first_ - recv_self : recv_self - self_first_;
      std::size_t const saved = distance < stay ? detail::RowShiftShape(stay, distance, target_chunks).saved_rows() : 0;
      ((save_bytes = std::max(save_bytes, saved * detail::columns(views) * sizeof(typename Views::value_type))), ...);
    }
    std::size_t const send_rows = remote.send_offsets.back(), recv_rows = remote.recv_offsets.back();
    std::size_t const send_bytes = (send_rows * record + align - 1) / align * align;
    auto const send_buffer = detail::reusable_buffer<Memory>(0, send_bytes + save_bytes + 1);
    auto const recv_buffer = detail::reusable_buffer<Memory>(1, recv_rows * record + 1);
    char* const send = send_buffer.data();
    char* const recv = recv_buffer.data();
    auto const order = export_order_;
    // All rows to other ranks are packed before the rows that stay move over them.
    field = 0;
    ((detail::pack_field(space, views, order, offsets[field], record, 0, send_self, 0, send),
      detail::pack_field(space, views, order, offsets[field], record, send_self_end, num_send, stay, send),
      ++field),
     ...);
    char* const save = send + send_bytes;
    if (run) {
      (detail::shift_rows(space, views, self_first_, recv_self, stay,
                          reinterpret_cast<typename Views::non_const_value_type*>(save), target_chunks),
       ...);
    } else if (stay > 0) {
      auto const through_buffer = [&](auto const& view) {
        std::size_t const row_bytes = detail::columns(view) * sizeof(typename std::decay_t<decltype(view)>::value_type);
        detail::pack_field(space, view, order, 0, row_bytes, send_self, send_self_end, send_self, save);
        detail::unpack_field(space, save, 0, row_bytes, recv_self, recv_self_end, recv_self, view);
      };
      (through_buffer(views), ...);
    }
    send_remote_records(space, remote, record, send_buffer, recv_buffer);
    field = 0;
    ((detail::unpack_field(space, recv, offsets[field], record, 0, recv_self, 0, views),
      detail::unpack_field(space, recv, offsets[field], record, recv_self_end, num_recv, stay, views), ++field),
     ...);
    compat::fence(space, "kfmm::exchange_plan (records unpacked)");
  }

  /// \brief exchange_in_place() for elements held in another order, with the imports arranged
  /// by their keys: one pass over the rows that stay, where a permutation before the exchange,
  /// a move of the staying rows and a permutation after it take three. Element e of the plan is
  /// row rows(e) of the Views and has key keys(e). The keys travel in the records (one message
  /// per partner) into `import_keys` (import order, ≥ num_import() rows); `arrange()`, called
  /// once they are all there, returns the arrangement (row j of the result is import
  /// arrangement(j), e.g. the permutation of sorting import_keys in place) with its kernels
  /// finished. Each View then holds its imports in that order in its first num_import() rows,
  /// arranged column by column through `scratch` (8-byte words, ≥ num_import() rows). Every
  /// View needs max(num_import(), the largest row read + 1) rows; no two of the Views, keys,
  /// import_keys and scratch may overlap.
  template <class Rows, class Keys, class ImportKeys, class Arrange, class Scratch, class... Views>
  void exchange_arranged(Rows const& rows, Keys const& keys, ImportKeys const& import_keys, Arrange const& arrange,
                         Scratch const& scratch, Views const&... views) const {
    static_assert(sizeof...(Views) > 0, "exchange_arranged needs at least one View");
    check_usable();
    check_rows(rows, num_elements_, "rows");
    check_rows(keys, num_elements_, "keys");
    check_rows(import_keys, num_import(), "import keys");
    check_rows(scratch, num_import(), "scratch");
    (check_rows(views, num_import(), "arranged"), ...);
    check_apart(keys, import_keys, scratch, views...);
    std::size_t offsets[1 + sizeof...(Views)];
    std::size_t align = 1;
    std::size_t const record = record_layout(offsets, align, keys, views...);
    int const self = rank_;
    detail::MessageCounts const remote = remote_counts();
    std::size_t const num_send = counts_.send_offsets.back(), num_recv = counts_.recv_offsets.back();
    std::size_t const send_self = counts_.send_offsets[self], send_self_end = counts_.send_offsets[self + 1];
    std::size_t const recv_self = counts_.recv_offsets[self], recv_self_end = counts_.recv_offsets[self + 1];
    std::size_t const stay = send_self_end - send_self;
    execution_space space;
    auto const send_buffer = detail::reusable_buffer<Memory>(0, remote.send_offsets.back() * record + 1);
    auto const recv_buffer = detail::reusable_buffer<Memory>(1, remote.recv_offsets.back() * record + 1);
    char* const send = send_buffer.data();
    char const* const recv = recv_buffer.data();
    auto const order = export_order_;
    detail::RowsThrough<decltype(order), Rows> const through{order, rows, 0};
    detail::pack_field(space, keys, order, offsets[0], record, 0, send_self, 0, send);
    detail::pack_field(space, keys, order, offsets[0], record, send_self_end, num_send, stay, send);
    std::size_t field = 1;
    ((detail::pack_field(space, views, through, offsets[field], record, 0, send_self, 0, send),
      detail::pack_field(space, views, through, offsets[field], record, send_self_end, num_send, stay, send),
      ++field),
     ...);
    send_remote_records(space, remote, record, send_buffer, recv_buffer);
    detail::unpack_field(space, recv, offsets[0], record, 0, recv_self, 0, import_keys);
    detail::unpack_field(space, recv, offsets[0], record, recv_self_end, num_recv, stay, import_keys);
    detail::gather_self_keys(space, keys, order, send_self, import_keys, recv_self, stay);
    compat::fence(space, "kfmm::exchange_plan (keys arranged)");
    auto const arrangement = arrange();
    detail::RowsThrough<decltype(order), Rows> const self_rows{order, rows, send_self};
    // The three dependent reads that find a row's source (arrangement, export order, rows) once,
    // not once per column; in 32 bits where the rows and records fit.
    auto const arrange_all = [&](auto index) {
      using Index = decltype(index);
      auto const sources = detail::typed_buffer<Index, Memory>(3, num_recv);
      detail::arrangement_sources(space, arrangement, self_rows, recv_self, recv_self_end, num_recv, sources);
      field = 1;
      auto const arrange_view = [&](auto const& view) {
        for (std::size_t c = 0; c < detail::columns(view); ++c) {
          detail::arrange_column(space, view, c, sources, recv, offsets[field], record, num_recv, scratch);
          detail::copy_column_back(space, scratch, c, num_recv, view);
        }
        ++field;
      };
      (arrange_view(views), ...);
    };
    std::size_t const largest_row = std::max({num_recv, std::size_t(views.extent(0))...});
    if (largest_row <= std::size_t(std::numeric_limits<std::int32_t>::max()))
      arrange_all(std::int32_t());
    else
      arrange_all(std::int64_t());
    compat::fence(space, "kfmm::exchange_plan (records arranged)");
  }

 private:
  // Record layout of one row of `views`: each field at an offset aligned for its type (into
  // `offsets`), records aligned for all (`align`). Returns the record's bytes.
  template <class... Views>
  static std::size_t record_layout(std::size_t* offsets, std::size_t& align, Views const&... views) {
    std::size_t record = 0, field = 0;
    align = 1;
    auto const place = [&](std::size_t size, std::size_t alignment, std::size_t width) {
      record = (record + alignment - 1) / alignment * alignment;
      offsets[field++] = record;
      record += size * width;
      if (alignment > align) align = alignment;
    };
    (place(sizeof(typename Views::value_type), alignof(typename Views::value_type), detail::columns(views)), ...);
    return (record + align - 1) / align * align;
  }

  // The buffers of record exchanges hold only the rows to and from other ranks: the messages'
  // counts without self.
  detail::MessageCounts remote_counts() const {
    detail::MessageCounts remote = counts_;
    remote.send_counts[rank_] = remote.recv_counts[rank_] = 0;
    remote.send_offsets = detail::offsets_of(remote.send_counts);
    remote.recv_offsets = detail::offsets_of(remote.recv_counts);
    return remote;
  }

  void check_usable() const {
    if (counts_.send_offsets.empty())
      fail("ExchangePlan: this plan was default-constructed; build it with ExchangePlan(context, destinations, n)");
    if (counts_only_)
      fail("ExchangePlan: this plan keeps only its counts (counts_only()); exchange along the plan it was taken from");
  }

  template <class First, class... Rest>
  static void check_apart(First const& first, Rest const&... rest) {
    ((detail::aliasing(first, rest) != 0
          ? fail("ExchangePlan: the Views '{}' and '{}' given to one exchange overlap; give distinct fields",
                 first.label(), rest.label())
          : void()),
     ...);
    if constexpr (sizeof...(Rest) > 0) check_apart(rest...);
  }

  // The remote messages of packed records (`record` bytes per row; `counts` without self rows),
  // from `send` to `recv`, staged through host memory where MPI cannot reach `Memory`.
  template <class Buffer>
  void send_remote_records(execution_space const& space, detail::MessageCounts const& counts, std::size_t record,
                           Buffer const& send, Buffer const& recv) const {
    std::size_t const send_bytes = counts.send_offsets.back() * record, recv_bytes = counts.recv_offsets.back() * record;
    bytes_sent_ = send_bytes;
    bytes_received_ = recv_bytes;
    if (!KFMM_ENABLE_GPU_AWARE_MPI) count_host_device_bytes(bytes_sent_ + bytes_received_);
    constexpr bool mpi_reaches_memory =
        KFMM_ENABLE_GPU_AWARE_MPI || Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible;
    compat::fence(space, "kfmm::exchange_plan (records packed)");
    if constexpr (mpi_reaches_memory) {
      detail::exchange_remote_bytes(comm_, rank_, counts, record, send.data(), recv.data(), max_message_bytes_);
    } else {
      auto const send_host = detail::reusable_buffer<compat::StagingSpace>(0, send_bytes + 1);
      auto const recv_host = detail::reusable_buffer<compat::StagingSpace>(1, recv_bytes + 1);
      auto const head = [](auto const& buffer, std::size_t bytes) {
        return Kokkos::subview(buffer, Kokkos::make_pair(std::size_t(0), bytes));
      };
      copy_contiguous(space, head(send_host, send_bytes), head(send, send_bytes));
      compat::fence(space, "kfmm::exchange_plan (records staged)");
      detail::exchange_remote_bytes(comm_, rank_, counts, record, send_host.data(), recv_host.data(),
                                    max_message_bytes_);
      copy_contiguous(space, head(recv, recv_bytes), head(recv_host, recv_bytes));
    }
  }

  std::shared_ptr<Context const> context_;  // keeps the communicator alive; none in a default plan (no MPI)
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  std::size_t num_elements_ = 0;
  std::size_t max_message_bytes_ = INT_MAX;
  detail::MessageCounts counts_;
  Kokkos::View<std::size_t*, Memory> export_order_;
  bool counts_only_ = false;
  mutable std::size_t bytes_sent_ = 0;
  mutable std::size_t bytes_received_ = 0;
  static constexpr std::size_t no_run = std::size_t(-1);
  // The first element of the self rows' run, when they form one ascending run of elements
  // (particles sorted by key and cut into key ranges): exchanges copy them directly, or not at all.
  std::size_t self_first_ = no_run;

  template <class View>
  static void check_rows(View const& view, std::size_t rows, char const* what) {
    static_assert(View::rank == 1 || View::rank == 2, "ExchangePlan moves rank-1 or (n, k) Views");
    static_assert(std::is_trivially_copyable<typename View::value_type>::value,
                  "ExchangePlan moves bytes: the View's value type must be trivially copyable");
    static_assert(std::is_same<typename View::memory_space, Memory>::value,
                  "the View must live in the plan's memory space");
    if (view.extent(0) < rows)
      fail("ExchangePlan: the {} View '{}' has {} rows but the plan needs {}", what, view.label(), view.extent(0),
           rows);
  }

  // Copies rows [begin, end) outside the self rows [self_begin, self_end) between buffers.
  template <class Target, class Source>
  static void copy_remote_rows(Target const& target, Source const& source, std::size_t width, std::size_t rows,
                               std::size_t self_begin, std::size_t self_end) {
    auto const copy = [&](std::size_t begin, std::size_t end) {
      if (end <= begin) return;
      auto const range = Kokkos::make_pair(begin * width, end * width);
      copy_contiguous(execution_space(), Kokkos::subview(target, range), Kokkos::subview(source, range));
    };
    copy(0, self_begin);
    copy(self_end, rows);
  }

  // send_once() / reply_once(): packs every export (self rows included) in export order, sends
  // the remote ones with their counts, orders the arrivals by source rank into the receive
  // buffer (self rows from the send buffer) and unpacks them into imports(num_import()).
  template <class ExportView, class Imports>
  void send_with_counts(ExportView const& exports, Imports const& imports, std::vector<std::size_t> const* send_to,
                        std::vector<std::size_t> const* receive_from) {
    using T = typename ExportView::non_const_value_type;
    check_rows(exports, num_elements_, "exports");
    std::size_t const width = detail::columns(exports), row_bytes = width * sizeof(T);
    int const self = rank_;
    std::size_t const num_send = counts_.send_offsets.back();
    std::size_t const send_self = counts_.send_offsets[self], send_self_end = counts_.send_offsets[self + 1];
    execution_space space;
    auto const send = detail::typed_buffer<T, Memory>(0, num_send * width);
    detail::pack_rows(space, exports, export_order_, true, width, 0, num_send, send);
    compat::fence(space, "kfmm::exchange_plan (rows packed before sending with counts)");
    constexpr bool mpi_reaches_memory =
        KFMM_ENABLE_GPU_AWARE_MPI || Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible;
    // MPI reads the rows where they are, or from page-locked host staging (the remote rows).
    using MessageSpace = std::conditional_t<mpi_reaches_memory, Memory, compat::StagingSpace>;
    char const* outgoing = reinterpret_cast<char const*>(send.data());
    if constexpr (!mpi_reaches_memory) {
      auto const send_host = detail::typed_buffer<T, compat::StagingSpace>(0, num_send * width);
      copy_remote_rows(send_host, send, width, num_send, send_self, send_self_end);
      outgoing = reinterpret_cast<char const*>(send_host.data());
    }
    std::size_t arrived_bytes = 0;
    Kokkos::View<char*, MessageSpace> arrivals;
    auto const room = [&](std::size_t bytes) {
      arrivals = detail::reusable_buffer_keeping<MessageSpace>(2, bytes + 1, arrived_bytes);
      arrived_bytes = bytes;
      return arrivals.data();
    };
    detail::RowArrivals const arrived = detail::exchange_rows_with_counts(
        *context_, counts_.send_counts, counts_.send_offsets, row_bytes, outgoing, room, send_to, receive_from);
    if (arrivals.extent(0) == 0) arrivals = detail::reusable_buffer_keeping<MessageSpace>(2, 1, 0);
    counts_.recv_counts = arrived.counts;
    counts_.recv_counts[self] = send_self_end - send_self;
    counts_.recv_offsets = detail::offsets_of(counts_.recv_counts);
    std::size_t const num_recv = counts_.recv_offsets.back();
    std::size_t const recv_self = counts_.recv_offsets[self];
    bytes_sent_ = (num_send - (send_self_end - send_self)) * row_bytes;
    bytes_received_ = (num_recv - counts_.recv_counts[self]) * row_bytes;
    if (!KFMM_ENABLE_GPU_AWARE_MPI) count_host_device_bytes(bytes_sent_ + bytes_received_);

    // The arrivals in source-rank order: the import order.
    auto const recv = detail::typed_buffer<T, Memory>(1, num_recv * width);
    auto const bytes_of = [](auto const& view, std::size_t begin, std::size_t count) {
      using Space = typename std::decay_t<decltype(view)>::memory_space;
      return Kokkos::View<char*, Space, Kokkos::MemoryUnmanaged>(reinterpret_cast<char*>(view.data()) + begin, count);
    };
    std::vector<int> sources;
    for (int r = 0; r < int(arrived.counts.size()); ++r)
      if (r != self && arrived.counts[r] > 0) sources.push_back(r);
    if constexpr (mpi_reaches_memory) {
      for (int r : sources) {
        std::size_t const bytes = arrived.counts[r] * row_bytes;
        copy_contiguous(space, bytes_of(recv, counts_.recv_offsets[r] * row_bytes, bytes),
                        bytes_of(arrivals, arrived.byte_offsets[r], bytes));
      }
    } else {
      // Ordered on the host (a few small copies), then one copy to the device.
      auto const ordered_host = detail::typed_buffer<T, compat::StagingSpace>(1, num_recv * width);
      for (int r : sources)
        std::memcpy(reinterpret_cast<char*>(ordered_host.data()) + counts_.recv_offsets[r] * row_bytes,
                    arrivals.data() + arrived.byte_offsets[r], arrived.counts[r] * row_bytes);
      copy_remote_rows(recv, ordered_host, width, num_recv, recv_self, recv_self + counts_.recv_counts[self]);
    }
    std::size_t const stay = send_self_end - send_self;
    if (stay > 0)
      Kokkos::deep_copy(space, Kokkos::subview(recv, Kokkos::make_pair(recv_self * width, (recv_self + stay) * width)),
                        Kokkos::subview(send, Kokkos::make_pair(send_self * width, send_self_end * width)));
    auto const target = imports(num_recv);
    check_rows(target, num_recv, "imports");
    if (detail::columns(target) != width)
      fail("ExchangePlan: the export View '{}' has {} columns but the import View '{}' has {}", exports.label(), width,
           target.label(), detail::columns(target));
    detail::unpack_rows(space, recv, export_order_, true, width, 0, num_recv, target);
    compat::fence(space, "kfmm::exchange_plan (imports with counts unpacked)");
  }

  // Forward: slot j of the send buffer is element export_order_(j); received rows are imports.
  // Reverse: the roles of both sides swap and received slot j lands on element export_order_(j).
  template <class SourceView, class TargetView>
  void transfer(SourceView const& source, TargetView const& target, bool forward) const {
    using T = typename SourceView::non_const_value_type;
    static_assert(std::is_same<T, typename TargetView::non_const_value_type>::value,
                  "source and target Views must hold the same type");
    check_usable();
    std::size_t const width = detail::columns(source);
    if (detail::columns(target) != width)
      fail("ExchangePlan: the source View '{}' has {} columns but the target View '{}' has {}", source.label(), width,
           target.label(), detail::columns(target));
    detail::MessageCounts counts = counts_;
    if (!forward) {
      std::swap(counts.send_counts, counts.recv_counts);
      std::swap(counts.send_offsets, counts.recv_offsets);
    }
    std::size_t const num_send = counts.send_offsets.back(), num_recv = counts.recv_offsets.back();
    execution_space space;
    auto const order = export_order_;
    // Buffers reused across exchanges (also across plans): a walk level allocates nothing.
    // `source` and `target` are never these buffers (they are kfmm-internal), so a View
    // exchanged in place stays safe: all rows are packed before any is written.
    auto const send = detail::typed_buffer<T, Memory>(0, num_send * width);
    auto const recv = detail::typed_buffer<T, Memory>(1, num_recv * width);
    int const self = rank_;
    std::size_t const send_self = counts.send_offsets[self], send_self_end = counts.send_offsets[self + 1];
    std::size_t const recv_self = counts.recv_offsets[self], recv_self_end = counts.recv_offsets[self + 1];
    auto const self_send = Kokkos::make_pair(send_self * width, send_self_end * width);
    auto const self_recv = Kokkos::make_pair(recv_self * width, recv_self_end * width);
    // Self rows that form a run go straight from source to target, or stay where they are in an
    // exchange in place whose run starts at the same row on both sides; in place at another
    // row they go to the receive buffer directly (all reads of source before any write).
    // Otherwise (no run, partly overlapping Views) through both buffers.
    std::size_t const source_first = forward ? self_first_ : send_self;
    std::size_t const target_first = forward ? recv_self : self_first_;
    int const alias = detail::aliasing(source, target);
    bool const run = self_first_ != no_run && alias >= 0;
    bool const direct = run && (alias == 0 || source_first == target_first);  // self rows skip the buffers
    if (run) {
      detail::pack_rows(space, source, order, forward, width, 0, send_self, send);
      detail::pack_rows(space, source, order, forward, width, send_self_end, num_send, send);
      if (alias == 0)
        detail::copy_rows(space, source, source_first, target, target_first, width, send_self_end - send_self);
      else if (!direct)
        detail::pack_run(space, source, source_first, width, send_self_end - send_self, recv, recv_self);
    } else {
      detail::pack_rows(space, source, order, forward, width, 0, num_send, send);
      Kokkos::deep_copy(space, Kokkos::subview(recv, self_recv), Kokkos::subview(send, self_send));
    }

    bytes_sent_ = (num_send * width - (self_send.second - self_send.first)) * sizeof(T);
    bytes_received_ = (num_recv * width - (self_recv.second - self_recv.first)) * sizeof(T);
    // What the staging below moves on a GPU build without GPU-aware MPI.
    if (!KFMM_ENABLE_GPU_AWARE_MPI) count_host_device_bytes(bytes_sent_ + bytes_received_);
    constexpr bool mpi_reaches_memory =
        KFMM_ENABLE_GPU_AWARE_MPI || Kokkos::SpaceAccessibility<Kokkos::HostSpace, Memory>::accessible;
    if constexpr (mpi_reaches_memory) {
      compat::fence(space, "kfmm::exchange_plan (data packed before sending)");
      detail::exchange_remote_bytes(comm_, rank_, counts, width * sizeof(T), reinterpret_cast<char const*>(send.data()),
                                    reinterpret_cast<char*>(recv.data()), max_message_bytes_);
    } else {
      // Page-locked host staging, reused: the device copies run at full speed.
      auto const send_host = detail::typed_buffer<T, compat::StagingSpace>(0, num_send * width);
      auto const recv_host = detail::typed_buffer<T, compat::StagingSpace>(1, num_recv * width);
      compat::fence(space, "kfmm::exchange_plan (data packed before staging)");
      copy_remote_rows(send_host, send, width, num_send, counts.send_offsets[self], counts.send_offsets[self + 1]);
      detail::exchange_remote_bytes(comm_, rank_, counts, width * sizeof(T),
                                    reinterpret_cast<char const*>(send_host.data()),
                                    reinterpret_cast<char*>(recv_host.data()), max_message_bytes_);
      copy_remote_rows(recv, recv_host, width, num_recv, counts.recv_offsets[self], counts.recv_offsets[self + 1]);
    }

    if (direct) {
      detail::unpack_rows(space, recv, order, forward, width, 0, recv_self, target);
      detail::unpack_rows(space, recv, order, forward, width, recv_self_end, num_recv, target);
    } else {
      detail::unpack_rows(space, recv, order, forward, width, 0, num_recv, target);
    }
    compat::fence(space, "kfmm::exchange_plan (imports unpacked)");
  }
};

}  // namespace kfmm
