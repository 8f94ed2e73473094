// Writes the starting corpora of the fuzz targets into DIR/<target>/ (scripts/fuzz.sh runs it):
// valid particle files from kfmm's own writer for the raw-bytes target, the default run file for
// the run-file target, and byte strings that the structured targets turn into mostly valid files
// (a constant byte makes every choice take the same branch: 7 is "as the writer would" in most).
#include <fstream>
#include <iostream>
#include <kfmm/io/particle_file.hpp>
#include <kfmm/io/run_file.hpp>

#include "fuzz_common.hpp"

using namespace kfmm;
namespace fs = std::filesystem;

namespace {

void write_text(fs::path const& path, std::string const& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

Particles<HostSpace> small_set(std::size_t n) {
  Particles<HostSpace> p(n);
  p.num = n;
  p.num_total = n;
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) {
      p.pos(i, k) = 0.1 * double(i) + k;
      p.vel(i, k) = 0.01 * double(k) - 0.02 * double(i);
    }
    p.mass(i) = 1.0 / double(n);
    p.id(i) = i + 1;
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_make_seeds DIR\n";
    return 2;
  }
  fs::path const root = argv[1];
  auto& env = fuzz::environment();
  write_text(root / "run_file" / "default.yaml", default_run_file());

  SnapshotHeader header;
  header.time = 0.25;
  header.units = UnitSystem::astro(1, 1, 1e10);
  header.parameters = {{"Seed", std::int64_t{42}}, {"Theta", 0.75}, {"Name", std::string("seed")}};
  ParticleFileOptions options;
  auto const bytes = root / "particle_file_bytes";
  fs::create_directories(bytes);
  write_particles(env.world(), (bytes / "single_float.hdf5").string(), small_set(4), header, options);
  options.precision = Precision::Double;
  options.compression = 1;
  write_particles(env.world(), (bytes / "double_deflate.hdf5").string(), small_set(3), header, options);

  for (char const* target : {"particle_file", "restart"})
    for (int byte : {7, 9, 12, 23})
      write_text(root / target / ("constant_" + std::to_string(byte)), std::string(512, char(byte)));
  std::cout << "seeds written to " << root.string() << "\n";
  return 0;
}
