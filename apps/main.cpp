// `kfmm`: the command-line tool. Errors become one line on stderr (from rank 0; every rank
// agrees on them first) and a non-zero exit code.
#include "commands.hpp"

#include <kfmm/build_config.hpp>
#include <kfmm/core/error.hpp>
#include <kfmm/core/types.hpp>

#include <kfmm/core/format.hpp>

#include <cstdio>

int main(int argc, char** argv) {
  try {
    kfmm::Environment environment(argc, argv);
    bool const root = environment.world().is_root();
    CLI::App app{"kfmm: Fast Multipole Method gravity for N-body simulations (Kokkos + MPI)", "kfmm"};
    app.set_version_flag("--version", fmt::format("kfmm {} (Kokkos {}, backend {})", KFMM_VERSION_STRING,
                                                  kfmm::compat::version_string(), kfmm::compat::backend_name<kfmm::ExecutionSpace>()));
    app.require_subcommand(1);
    kfmm::app::add_ic_command(app, environment);
    kfmm::app::add_info_command(app, environment);
    kfmm::app::add_run_command(app, environment);
    kfmm::app::add_forces_command(app, environment);
    kfmm::app::add_bench_command(app, environment);
    kfmm::app::add_knn_command(app, environment);
    kfmm::app::add_fof_command(app, environment);
    try {
      app.parse(argc, argv);
    } catch (CLI::ParseError const& e) {
      int const code = root ? app.exit(e) : (e.get_exit_code());
      return code;
    } catch (std::exception const& e) {
      // Errors inside commands are agreed across ranks before they are thrown.
      if (root) std::fprintf(stderr, "kfmm: error: %s\n", e.what());
      return 1;
    }
    return 0;
  } catch (std::exception const& e) {
    std::fprintf(stderr, "kfmm: error: %s\n", e.what());
    return 1;
  }
}
