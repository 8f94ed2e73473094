// `kfmm bench`: times the force solver on generated or file particles (under mpirun too) and
// measures its accuracy against direct summation on a sample of targets, and the peak memory of
// the Kokkos allocations per particle (what sizes a run on a GPU).
#include "bench_active.hpp"
#include "commands.hpp"
#include "fmm_options.hpp"
#include "input_options.hpp"

#include <kfmm/comm/initial_conditions.hpp>
#include <kfmm/core/kernel_shape.hpp>
#include <kfmm/core/memory_usage.hpp>
#include <kfmm/fmm/accuracy.hpp>
#include <kfmm/fmm/expansion_dispatch.hpp>
#include <kfmm/fmm/solver.hpp>
#include <kfmm/io/particle_file.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace kfmm::app {

namespace {

struct BenchOptions {
  std::string ic = "clumps";
  std::string input;
  std::string duplicate_ids = "reject";
  std::uint64_t n = 1000000;
  std::uint64_t seed = ICOptions{}.seed;
  int clumps = ICOptions{}.clumps;
  int repeat = 3;
  std::uint64_t samples = 1000;
  bool json = false;
  ActiveBenchOptions active;  ///< active.fraction > 0: time compute_active instead
};

// Per-phase seconds of the slowest rank, averaged over the timed repeats.
std::vector<std::pair<std::string, double>> slowest_phases(Context const& context,
                                                           std::vector<ForceStats> const& runs) {
  std::vector<std::pair<std::string, double>> phases;
  for (auto const& [name, seconds] : runs.front().phases) {
    double sum = 0;
    for (auto const& run : runs) sum += run.seconds(name);
    double mean = sum / runs.size(), slowest = 0;
    MPI_Allreduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, context.comm());
    phases.emplace_back(name, slowest);
  }
  return phases;
}

// Peak bytes of one rank during the evaluations: all memory spaces together, the execution
// space's memory space ("device") and the host space (the same one on CPU backends).
struct RankMemory {
  std::uint64_t particles = 0, peak = 0, device_peak = 0, host_peak = 0;
};

std::vector<RankMemory> gather_memory(Context const& context, RankMemory const& mine) {
  std::uint64_t const local[4] = {mine.particles, mine.peak, mine.device_peak, mine.host_peak};
  std::vector<std::uint64_t> all(context.is_root() ? 4 * context.size() : 0);
  MPI_Gather(local, 4, MPI_UINT64_T, all.data(), 4, MPI_UINT64_T, 0, context.comm());
  std::vector<RankMemory> ranks;
  for (std::size_t r = 0; r < all.size(); r += 4) ranks.push_back(RankMemory{all[r], all[r + 1], all[r + 2], all[r + 3]});
  return ranks;
}

double per_particle(std::uint64_t bytes, std::uint64_t particles) {
  return particles > 0 ? double(bytes) / double(particles) : 0.0;
}

struct MemorySummary {
  std::uint64_t peak_max = 0, peak_sum = 0, device_peak_max = 0;
  double per_particle = 0, per_particle_max = 0, device_per_particle_max = 0;
};

MemorySummary summarize(std::vector<RankMemory> const& ranks) {
  MemorySummary summary;
  std::uint64_t particles = 0;
  for (auto const& rank : ranks) {
    particles += rank.particles;
    summary.peak_sum += rank.peak;
    summary.peak_max = std::max(summary.peak_max, rank.peak);
    summary.device_peak_max = std::max(summary.device_peak_max, rank.device_peak);
    summary.per_particle_max = std::max(summary.per_particle_max, per_particle(rank.peak, rank.particles));
    summary.device_per_particle_max =
        std::max(summary.device_per_particle_max, per_particle(rank.device_peak, rank.particles));
  }
  summary.per_particle = per_particle(summary.peak_sum, particles);
  return summary;
}

void bench(Environment const& environment, BenchOptions const& options, FMMConfig const& config) {
  Context const& context = environment.world();
  MemoryAccounting memory;
  Particles<HostSpace> host;
  std::string source;
  if (!options.input.empty()) {
    host = read_particles(context, options.input, nullptr, nullptr, parse_duplicate_id_policy(options.duplicate_ids));
    source = options.input;
  } else {
    ICOptions ic;
    ic.kind = parse_ic_kind(options.ic);
    ic.n_total = options.n;
    ic.seed = options.seed;
    ic.clumps = options.clumps;
    host = make_initial_conditions(context, ic);
    source = to_string(ic.kind);
  }
  auto particles = to_device(host);
  host = Particles<HostSpace>();  // not needed any more; a GPU run keeps no host copy either
  memory.reset_peak();            // the peak from here on includes the particles and the solver
  if (options.active.fraction > 0) {
    ActiveBenchOptions active = options.active;
    active.repeat = options.repeat;
    active.json = options.json;
    bench_active_forces(environment, particles, config, active, source);
    return;
  }
  ForceSolver solver(context, config);
  solver.collect_statistics(true);
  solver.compute(particles);  // warm-up: first decomposition, allocations
  // The first call of the relative criterion also estimates |a| (later calls reuse it).
  double first[2] = {solver.stats().total_seconds, 0};
  for (auto const& [name, seconds] : solver.stats().phases)
    if (name == "estimate") first[1] += seconds;
  double first_slowest[2] = {0, 0};
  MPI_Allreduce(first, first_slowest, 2, MPI_DOUBLE, MPI_MAX, context.comm());
  auto const first_phases = slowest_phases(context, {solver.stats()});
  std::vector<ForceStats> runs;
  for (int r = 0; r < options.repeat; ++r) {
    solver.compute(particles);
    runs.push_back(solver.stats());
  }
  double total = 0;
  for (auto const& run : runs) total += run.total_seconds;
  double mean_total = total / runs.size(), slowest_total = 0;
  MPI_Allreduce(&mean_total, &slowest_total, 1, MPI_DOUBLE, MPI_MAX, context.comm());
  auto const phases = slowest_phases(context, runs);
  ForceStats const& last = runs.back();
  // Before the accuracy measurement, which allocates for direct summation only.
  std::string const device_space = MemorySpace::name(), host_space = HostSpace::name();
  auto const largest_views = memory.current_by_label();  // kept between evaluations: the solver's buffers
  auto const memory_ranks = gather_memory(
      context, RankMemory{particles.num, memory.peak_bytes(), memory.usage(device_space).peak_bytes,
                          memory.usage(host_space).peak_bytes});
  AccuracyReport const accuracy =
      measure_accuracy(context, particles, solver.potential(), solver.acceleration(), config, options.samples);
  std::uint64_t const imported[3] = {last.imported_nodes, last.imported_particles, last.host_device_bytes};
  std::uint64_t imported_max[3] = {0, 0, 0};
  MPI_Allreduce(imported, imported_max, 3, MPI_UINT64_T, MPI_MAX, context.comm());
  if (!context.is_root()) return;
  double const rate = particles.num_total / slowest_total;
  MemorySummary const mem = summarize(memory_ranks);
  bool const separate_host = device_space != host_space;
  if (options.json) {
    std::string phase_json;
    for (auto const& [name, seconds] : phases)
      phase_json += fmt::format("{}\"{}\": {:.6g}", phase_json.empty() ? "" : ", ", name, seconds);
    std::string rank_json;
    for (auto const& rank : memory_ranks)
      rank_json += fmt::format("{}{{\"particles\": {}, \"peak_bytes\": {}, \"device_peak_bytes\": {}, "
                               "\"host_peak_bytes\": {}, \"bytes_per_particle\": {:.1f}}}",
                               rank_json.empty() ? "" : ", ", rank.particles, rank.peak, rank.device_peak,
                               rank.host_peak, per_particle(rank.peak, rank.particles));
    std::string views_json;
    for (std::size_t i = 0; i < std::min<std::size_t>(largest_views.size(), 12); ++i)
      views_json += fmt::format("{}\"{}\": {}", i == 0 ? "" : ", ", largest_views[i].first, largest_views[i].second);
    std::string const memory_json = fmt::format(
        "\"memory\": {{\"device_space\": \"{}\", \"host_space\": \"{}\", \"peak_bytes_max\": {}, "
        "\"peak_bytes_sum\": {}, \"bytes_per_particle\": {:.1f}, \"bytes_per_particle_max\": {:.1f}, "
        "\"device_peak_bytes_max\": {}, \"device_bytes_per_particle_max\": {:.1f}, \"tool_chained\": {}, "
        "\"per_rank\": [{}], \"largest_views_rank0\": {{{}}}}}",
        device_space, host_space, mem.peak_max, mem.peak_sum, mem.per_particle, mem.per_particle_max,
        mem.device_peak_max, mem.device_per_particle_max, memory.tool_chained(), rank_json, views_json);
    fmt::print(
        "{{\"source\": \"{}\", \"n\": {}, \"ranks\": {}, \"threads_per_rank\": {}, \"order\": {}, \"theta\": {}, \"mac\": \"{}\", \"tolerance\": {}, "
        "\"leaf_size\": {}, \"precision\": \"{}\", \"kernel\": \"{}\", \"softening\": {}, \"kernel_shape\": \"{}\", "
        "\"seconds\": {:.6g}, \"first_seconds\": {:.6g}, \"estimate_seconds\": {:.6g}, "
        "\"particles_per_second\": {:.6g}, \"phases\": {{{}}}, \"p2p_pairs\": {}, \"m2l\": {}, \"m2p\": {}, \"nodes\": {}, "
        "\"leaves\": {}, \"particles_min\": {}, \"particles_max\": {}, \"bytes_sent_max\": {}, "
        "\"bytes_received_max\": {}, \"imported_nodes_max\": {}, \"imported_particles_max\": {}, "
        "\"host_device_bytes_max\": {}, "
        "\"cost_imbalance\": {:.4g}, \"samples\": {}, \"force_l2\": {:.4g}, \"median\": {:.4g}, \"p99\": {:.4g}, \"p999\": {:.4g}, "
        "\"max\": {:.4g}, \"max_id\": {}, \"max_radius\": {:.4g}, \"potential_l2\": {:.4g}, {}}}\n",
        source, particles.num_total, context.size(), environment.threads(), config.order, config.theta,
        to_string(config.opening), config.tolerance, config.leaf_size, to_string(config.precision), to_string(config.softening), config.softening_length,
        use_gpu_shape<ExecutionSpace>() ? "gpu" : "cpu", slowest_total, first_slowest[0], first_slowest[1], rate, phase_json, last.p2p_pairs, last.m2l, last.m2p, last.nodes, last.leaves, last.particles_min,
        last.particles_max, last.bytes_sent_max, last.bytes_received_max, imported_max[0], imported_max[1],
        imported_max[2], last.cost_imbalance, accuracy.samples, accuracy.force_l2,
        accuracy.median, accuracy.p99, accuracy.p999, accuracy.max, accuracy.max_id, accuracy.max_radius,
        accuracy.potential_l2, memory_json);
    return;
  }
  std::string const mac = config.opening == OpeningCriterion::Relative
                             ? fmt::format(" + relative α = {} (estimate θ = {}, p = {})", config.tolerance, config.estimate_theta,
                                           expansion_order_built(config.estimate_order)
                                               ? std::min(config.estimate_order, config.order)
                                               : config.order)
                             : std::string();
  fmt::print("kfmm bench: {} particles ({}), {} rank(s) × {} thread(s); p = {}, θ = {}{}, leaf ≤ {}, {} {}, ε = {}{}\n",
             particles.num_total, source, context.size(), environment.threads(), config.order, config.theta, mac,
             config.leaf_size, to_string(config.precision), to_string(config.softening), config.softening_length,
             use_gpu_shape<ExecutionSpace>() ? "; GPU-shaped kernels" : "");
  fmt::print("  time per evaluation {:.4f} s (mean of {}, slowest rank) = {:.3g} particles/s\n", slowest_total,
             runs.size(), rate);
  for (auto const& [name, seconds] : phases)
    fmt::print("    {:<9} {:8.4f} s  {:5.1f} %\n", name, seconds, 100 * seconds / slowest_total);
  // The first evaluation of a solver (fresh buffers) against the later ones, phase by phase.
  std::string first_text;
  for (auto const& [name, seconds] : first_phases) first_text += fmt::format(" {} {:.4f}", name, seconds);
  fmt::print("  first evaluation {:.4f} s = {:.3f} × the later ones;{}\n", first_slowest[0],
             slowest_total > 0 ? first_slowest[0] / slowest_total : 0.0, first_text);
  if (config.opening == OpeningCriterion::Relative)
    fmt::print("  of the first evaluation, {:.4f} s estimating |a| (later calls on the same particles reuse the "
               "last |a|)\n",
               first_slowest[1]);
  fmt::print("  interactions: {} P2P pairs ({:.1f}/particle), {} M2L ({:.2f}/particle), {} M2P ({:.2f}/particle); {} "
             "nodes, {} leaves\n",
             last.p2p_pairs, double(last.p2p_pairs) / particles.num_total, last.m2l,
             double(last.m2l) / particles.num_total, last.m2p, double(last.m2p) / particles.num_total, last.nodes,
             last.leaves);
  if (context.size() > 1)
    fmt::print("  ranks: particles min/mean/max {}/{:.0f}/{}; cost imbalance (max/mean) {:.3f}; sent/received max "
               "{:.3g}/{:.3g} MB; imported at most {} nodes, {} particles; host<->device copies at most {:.3g} MB "
               "(what a GPU build without GPU-aware MPI moves)\n",
               last.particles_min, last.particles_mean, last.particles_max, last.cost_imbalance,
               last.bytes_sent_max / 1e6, last.bytes_received_max / 1e6, imported_max[0], imported_max[1],
               imported_max[2] / 1e6);
  fmt::print("  memory: peak of Kokkos allocations during the evaluations (particles included) {:.4g} MB = {:.0f} "
             "B/particle{}{}\n",
             mem.peak_max / 1e6, mem.per_particle_max, context.size() > 1 ? " (max over ranks)" : "",
             separate_host ? fmt::format("; {} space {:.0f} B/particle", device_space, mem.device_per_particle_max)
                           : std::string());
  if (context.size() > 1 && context.size() <= 8) {  // one line per rank would not fit more
    std::string per_rank;
    for (std::size_t r = 0; r < memory_ranks.size(); ++r)
      per_rank += fmt::format("{}{}: {:.4g} MB {:.0f} B/particle", r == 0 ? "" : "; ", r, memory_ranks[r].peak / 1e6,
                              per_particle(memory_ranks[r].peak, memory_ranks[r].particles));
    fmt::print("    per rank: {}; all ranks {:.0f} B/particle\n", per_rank, mem.per_particle);
  }
  if (memory.tool_chained())
    fmt::print("    (a Kokkos Tools library is loaded: its allocation callbacks are still called)\n");
  if (accuracy.samples == 0) return;
  fmt::print("  {}\n", describe(accuracy));
}

}  // namespace

void add_bench_command(CLI::App& app, Environment& environment) {
  auto options = std::make_shared<BenchOptions>();
  auto fmm = std::make_shared<FmmOptions>();
  auto* command = app.add_subcommand("bench", "Time the force solver and measure its accuracy");
  std::vector<std::string> kinds{"gaussian_clumps"};
  for (ICKind kind : all_ic_kinds()) kinds.push_back(to_string(kind));
  command->add_option("--ic", options->ic, "generated distribution: a kind of `kfmm ic` at its default parameters")
      ->capture_default_str()
      ->check(CLI::IsMember(kinds));
  command->add_option("--input", options->input, "read particles from this file instead");
  add_duplicate_ids_option(command, options->duplicate_ids);
  command->add_option("--n", options->n, "number of particles")->capture_default_str()->check(CLI::PositiveNumber);
  command->add_option("--seed", options->seed, "random seed")->capture_default_str();
  command->add_option("--clumps", options->clumps, "Gaussian clumps")->capture_default_str();
  command->add_option("--repeat", options->repeat, "timed evaluations (after one warm-up)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  command->add_option("--samples", options->samples, "targets checked against direct summation (0: none)")
      ->capture_default_str();
  command->add_flag("--json", options->json, "one JSON line instead of the table");
  command->add_option("--active-fraction", options->active.fraction,
                      "time ForceSolver::compute_active with this fraction of the particles active (0 < F ≤ 1; 0: the usual bench) "
                      "against a full evaluation, interleaved, each after a drift of every particle")
      ->check(CLI::Range(0.0, 1.0));
  command->add_option("--active-pick", options->active.pick,
                      "which particles are active: the largest |a| (the shortest time steps) or a random set")
      ->capture_default_str()
      ->check(CLI::IsMember({"acceleration", "random"}));
  add_fmm_options(command, fmm);
  command->callback([options, fmm, &environment] {
    FMMConfig config;
    collectively(environment.world(), [&] { config = fmm->resolve(); });
    bench(environment, *options, config);
  });
}

}  // namespace kfmm::app
