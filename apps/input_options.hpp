#pragma once
// Options of the commands that read or write particle files.
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

/// `--file-precision float|double`: stored precision of a written particle file.
inline void add_file_precision_option(CLI::App* command, std::string& precision,
                                      std::string const& description = "stored precision: float or double") {
  command->add_option("--file-precision", precision, description)
      ->capture_default_str()
      ->check(CLI::IsMember({"float", "double"}));
}

/// `--compression 0..9` of written datasets.
inline void add_compression_option(CLI::App* command, int& level) {
  command->add_option("--compression", level, "0: none; 1..9: shuffle + deflate level")
      ->capture_default_str()
      ->check(CLI::Range(0, 9));
}

}  // namespace kfmm::app
