#include <kfmm/integrate/diagnostics.hpp>

#include <kfmm/core/error.hpp>
#include <kfmm/core/fault_injection.hpp>

#include <kfmm/core/format.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

namespace kfmm {

namespace {

// Columns of the per-block sums: mass, 2K, mφ, momentum (3), angular momentum (3), m·x (3),
// mφ_ext; the per-rank record adds max |a|² as column 13.
constexpr int block_columns = 13;
constexpr int sum_columns = block_columns + 1;
// Particles per block: blocks are summed serially inside and in order between, which makes the
// result independent of the thread count.
constexpr std::size_t block_size = 1024;

}  // namespace

Diagnostics measure(Context const& context, Particles<MemorySpace> const& particles,
                    ScalarView<double> const& potential, Vec3View<double> const& acceleration, double kick,
                    ScalarView<double> const& external_potential) {
  std::size_t const n = particles.num;
  std::size_t const blocks = (n + block_size - 1) / block_size;
  Kokkos::View<double**, Kokkos::LayoutRight, MemorySpace> block_sums("kfmm::integrate::diagnostics::block_sums",
                                                                       blocks, block_columns);
  auto pos = particles.pos;
  auto vel = particles.vel;
  auto mass = particles.mass;
  bool const external = external_potential.extent(0) > 0;
  if (external && external_potential.extent(0) < n)
    fail("measure: the external potential View holds {} particles, fewer than the {} given",
         external_potential.extent(0), n);
  Kokkos::parallel_for(
      "kfmm::integrate::diagnostics::blocks", Kokkos::RangePolicy<ExecutionSpace>(0, blocks),
      KOKKOS_LAMBDA(std::size_t b) {
        double s[block_columns] = {};
        std::size_t const end = (b + 1) * block_size < n ? (b + 1) * block_size : n;
        for (std::size_t i = b * block_size; i < end; ++i) {
          double const m = mass(i);
          double v[3], x[3];
          for (int d = 0; d < 3; ++d) {
            v[d] = vel(i, d) + kick * acceleration(i, d);
            x[d] = pos(i, d);
          }
          s[0] += m;
          s[1] += m * (v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
          s[2] += m * potential(i);
          for (int d = 0; d < 3; ++d) s[3 + d] += m * v[d];
          s[6] += m * (x[1] * v[2] - x[2] * v[1]);
          s[7] += m * (x[2] * v[0] - x[0] * v[2]);
          s[8] += m * (x[0] * v[1] - x[1] * v[0]);
          for (int d = 0; d < 3; ++d) s[9 + d] += m * x[d];
          if (external) s[12] += m * external_potential(i);
        }
        for (int c = 0; c < block_columns; ++c) block_sums(b, c) = s[c];
      });
  double max_a2 = 0;
  Kokkos::parallel_reduce(
      "kfmm::integrate::diagnostics::max_acceleration", Kokkos::RangePolicy<ExecutionSpace>(0, n),
      KOKKOS_LAMBDA(std::size_t i, double& local) {
        double const a2 = acceleration(i, 0) * acceleration(i, 0) + acceleration(i, 1) * acceleration(i, 1) +
                          acceleration(i, 2) * acceleration(i, 2);
        if (a2 > local) local = a2;
      },
      Kokkos::Max<double>(max_a2));
  auto host_sums = Kokkos::create_mirror_view_and_copy(HostSpace(), block_sums);

  std::vector<double> local(sum_columns, 0.0);
  for (std::size_t b = 0; b < blocks; ++b)
    for (int c = 0; c < block_columns; ++c) local[c] += host_sums(b, c);
  local[block_columns] = max_a2;
  std::vector<double> all(static_cast<std::size_t>(sum_columns) * context.size());
  MPI_Allgather(local.data(), sum_columns, MPI_DOUBLE, all.data(), sum_columns, MPI_DOUBLE, context.comm());
  std::vector<double> total(sum_columns, 0.0);
  for (int r = 0; r < context.size(); ++r)
    for (int c = 0; c < sum_columns; ++c) {
      double const value = all[static_cast<std::size_t>(r) * sum_columns + c];
      if (c == block_columns)
        total[c] = value > total[c] ? value : total[c];
      else
        total[c] += value;
    }

  Diagnostics diagnostics;
  diagnostics.mass = total[0];
  diagnostics.kinetic = 0.5 * total[1];
  diagnostics.potential = 0.5 * total[2];
  diagnostics.external = total[12];
  diagnostics.total = diagnostics.kinetic + diagnostics.potential + diagnostics.external;
  for (int d = 0; d < 3; ++d) {
    diagnostics.momentum[d] = total[3 + d];
    diagnostics.angular_momentum[d] = total[6 + d];
    diagnostics.centre_of_mass[d] = total[0] > 0 ? total[9 + d] / total[0] : 0.0;
  }
  diagnostics.max_acceleration = std::sqrt(total[block_columns]);
  return diagnostics;
}

std::string DiagnosticsLog::header() {
  return "step,time,dt,kinetic,potential,total,energy_error,px,py,pz,Lx,Ly,Lz,com_x,com_y,com_z,max_acceleration,"
         "external_potential,centres_energy,centre_min_x,centre_min_y,centre_min_z,centre_spheres_x,centre_spheres_y,"
         "centre_spheres_z";
}

namespace {

/// The rows of an existing log up to `last_step`: those after it are dropped (the restarted run
/// repeats those steps), and so is everything from a row a crash cut short (no newline, missing
/// columns) on. A missing file keeps nothing.
std::string rows_up_to(std::string const& path, long long last_step) {
  std::string const columns = DiagnosticsLog::header();
  auto const commas = std::count(columns.begin(), columns.end(), ',');
  std::ifstream previous(path);
  std::string line, kept;
  std::getline(previous, line);
  while (std::getline(previous, line)) {
    if (previous.eof()) break;  // every row ends with a newline: this one was cut short
    if (line.empty()) continue;
    char* end = nullptr;
    long long const step = std::strtoll(line.c_str(), &end, 10);
    if (end == line.c_str() || *end != ',' || std::count(line.begin(), line.end(), ',') != commas) break;
    if (step > last_step) break;
    kept += line + "\n";
  }
  return kept;
}

}  // namespace

DiagnosticsLog::DiagnosticsLog(Context const& context, std::string const& path, long long resume_after_step) {
  std::string error;
  if (context.is_root()) {
    try {
      std::string const kept = header() + "\n" + (resume_after_step >= 0 ? rows_up_to(path, resume_after_step) : "");
      // The kept rows replace the file through a temporary: a crash in between leaves the old
      // file whole, with the rows that a continuation from an older restart keeps.
      std::string const temporary = path + ".tmp";
      std::FILE* staged = std::fopen(temporary.c_str(), "w");
      bool written = staged != nullptr && std::fputs(kept.c_str(), staged) >= 0;
      if (staged != nullptr) written = std::fclose(staged) == 0 && written;
      if (written) {
        fault_injection::point("diagnostics.resume");
        std::filesystem::rename(temporary, path);
        file_ = std::fopen(path.c_str(), "a");
      }
      if (!file_)
        error = fmt::format("cannot write the diagnostics file '{}': {}; check that the output directory exists and "
                            "is writable",
                            written ? path : temporary, std::strerror(errno));
    } catch (std::exception const& e) {
      error = fmt::format("cannot write the diagnostics file '{}': {}; check that the output directory is writable",
                          path, e.what());
    }
  }
  agree_on_error(context, error);
}

DiagnosticsLog::~DiagnosticsLog() {
  if (file_) std::fclose(file_);
}

void DiagnosticsLog::write(long long step, double dt, Diagnostics const& d) {
  if (!file_) return;
  fmt::print(file_, "{},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},"
                    "{:.17g},{:.17g},{:.17g},{:.17g}",
             step, d.time, dt, d.kinetic, d.potential, d.total, d.energy_error, d.momentum[0], d.momentum[1],
             d.momentum[2], d.angular_momentum[0], d.angular_momentum[1], d.angular_momentum[2], d.centre_of_mass[0],
             d.centre_of_mass[1], d.centre_of_mass[2], d.max_acceleration);
  // The centres only on the rows they were found for; the other rows leave the columns empty.
  fmt::print(file_, ",{:.17g},{:.17g}", d.external, d.centres);
  if (d.has_centres)
    fmt::print(file_, ",{:.17g},{:.17g},{:.17g},{:.17g},{:.17g},{:.17g}\n", d.centre_potential_minimum[0],
               d.centre_potential_minimum[1], d.centre_potential_minimum[2], d.centre_shrinking_spheres[0],
               d.centre_shrinking_spheres[1], d.centre_shrinking_spheres[2]);
  else
    fmt::print(file_, ",,,,,,\n");
  std::fflush(file_);
  fault_injection::point("diagnostics.row");
}

}  // namespace kfmm
