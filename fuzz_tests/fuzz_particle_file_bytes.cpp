// Raw-bytes fuzzing of read_particles: the input is written as a file and read. This mostly
// exercises libhdf5's own parser of the file format, which kfmm relies on and does not
// re-check (README, "Errors"); a crash inside libhdf5 is that boundary, not a kfmm bug.
#include <fstream>
#include <kfmm/core/error.hpp>
#include <kfmm/io/particle_file.hpp>

#include "fuzz_common.hpp"

using namespace kfmm;
using namespace kfmm::fuzz;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  environment();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(std::uint8_t const* data, std::size_t size) {
  clear_scratch();
  std::string const path = (scratch_directory() / "snapshot_000.hdf5").string();
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<char const*>(data), static_cast<std::streamsize>(size));
  }
  try {
    SnapshotHeader header;
    ForceFields fields;
    read_particles(environment().world(), path, &header, &fields);
    count_outcome(true);
  } catch (Error const&) {
    count_outcome(false);
  }
  return 0;
}
