#pragma once
// Options of the commands that read a particle file.
#include <CLI/CLI.hpp>

#include <string>

namespace kfmm::app {

/// `--duplicate-ids reject|renumber` (see DuplicateIdPolicy).
inline void add_duplicate_ids_option(CLI::App* command, std::string& policy) {
  command
      ->add_option("--duplicate-ids", policy,
                   "a file whose ParticleIDs repeat: reject it (naming the id and its rows), or renumber every "
                   "particle to its row + 1 (1..N)")
      ->capture_default_str()
      ->check(CLI::IsMember({"reject", "renumber"}));
}

}  // namespace kfmm::app
