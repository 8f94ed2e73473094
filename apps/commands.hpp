#pragma once
// The subcommands of `kfmm`; each file command_NAME.cpp defines one add_NAME_command.
#include <kfmm/comm/environment.hpp>

#include <CLI/CLI.hpp>

namespace kfmm::app {

void add_ic_command(CLI::App& app, Environment& environment);
void add_info_command(CLI::App& app, Environment& environment);
void add_run_command(CLI::App& app, Environment& environment);
void add_forces_command(CLI::App& app, Environment& environment);
void add_bench_command(CLI::App& app, Environment& environment);
void add_knn_command(CLI::App& app, Environment& environment);
void add_fof_command(CLI::App& app, Environment& environment);

}  // namespace kfmm::app
