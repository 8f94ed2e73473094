// FoF catalogues in GADGET-4's fof_tab layout and PartType1/GroupNr, read back with h5py.
#include <kfmm/comm/context.hpp>
#include <kfmm/io/fof_file.hpp>
#include <kfmm/io/particle_file.hpp>

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;
using kfmm::Context;

class FoFFile : public testing::Test {
 protected:
  Context world{MPI_COMM_WORLD};
  fs::path dir;

  void SetUp() override {
    long long token = getpid();
    MPI_Bcast(&token, 1, MPI_LONG_LONG, 0, world.comm());
    dir = fs::temp_directory_path() / ("kfmm_fof_file_test_" + std::to_string(token));
    if (world.is_root()) {
      fs::remove_all(dir);
      fs::create_directories(dir);
    }
    MPI_Barrier(world.comm());
  }
  void TearDown() override {
    MPI_Barrier(world.comm());
    if (world.is_root()) fs::remove_all(dir);
  }

  // Runs a python script (with h5py) on rank 0; every rank gets its exit status.
  int python(std::string const& script) {
    int status = 0;
    if (world.is_root()) {
      fs::path const file = dir / "check.py";
      std::ofstream(file) << script;
      status = 1;
      for (char const* candidate : {"python3", "/usr/bin/python3"})
        if (std::system((std::string(candidate) + " -c 'import h5py, numpy' >/dev/null 2>&1").c_str()) == 0) {
          status = std::system((std::string(candidate) + " " + file.string()).c_str());
          break;
        }
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, world.comm());
    return status;
  }
};

TEST_F(FoFFile, CatalogueHasGadget4Layout) {
  kfmm::FoFTable table;
  table.time = 0.5;
  table.box_size = 10;
  table.linking_length = 0.02;
  table.b = 0.2;
  table.min_members = 20;
  table.num_members_total = 70;
  if (world.is_root()) {
    table.length = {40, 30};
    table.min_id = {7, 3};
    table.most_bound_id = {9, 11};
    table.mass = {4.0, 3.0};
    table.velocity_dispersion = {0.5, 0.25};
    table.half_mass_radius = {0.1, 0.2};
    table.pos = {1, 2, 3, 4, 5, 6};
    table.vel = {-1, -2, -3, -4, -5, -6};
  }
  std::string const path = (dir / "fof_tab_000.hdf5").string();
  kfmm::write_fof_table(world, path, table);
  EXPECT_EQ(python("import h5py, numpy as np, sys\n"
                   "f = h5py.File('" + path + "', 'r')\n"
                   "h = f['Header'].attrs; g = f['Group']\n"
                   "assert h['Ngroups_Total'] == 2 and h['Ngroups_ThisFile'] == 2 and h['Nids_Total'] == 70\n"
                   "assert h['NumFiles'] == 1 and h['Time'] == 0.5 and h['BoxSize'] == 10 and h['Nsubhalos_Total'] == 0\n"
                   "assert f['Parameters'].attrs['FOF_LinkingLength'] == 0.02\n"
                   "assert list(g['GroupLen'][:]) == [40, 30] and g['GroupLen'].dtype == np.int32\n"
                   "assert g['GroupLenType'].shape == (2, 6) and list(g['GroupLenType'][:, 1]) == [40, 30]\n"
                   "assert list(g['GroupMassType'][:, 1]) == [4.0, 3.0] and g['GroupMassType'][:, 0].sum() == 0\n"
                   "assert (g['GroupPos'][:] == [[1, 2, 3], [4, 5, 6]]).all() and g['GroupVel'][1, 2] == -6\n"
                   "assert list(g['GroupMinID'][:]) == [7, 3] and list(g['GroupMostBoundID'][:]) == [9, 11]\n"
                   "assert list(g['GroupVelDisp'][:]) == [0.5, 0.25] and list(g['GroupHalfmassRad'][:]) == [0.1, 0.2]\n"),
            0);
}

TEST_F(FoFFile, ParticleCopyCarriesGroupNr) {
  std::size_t const n = 5 + std::size_t(world.rank());
  kfmm::Particles<kfmm::HostSpace> particles(n);
  particles.num = n;
  std::uint64_t total = 0, local = n;
  MPI_Allreduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, world.comm());
  particles.num_total = total;
  kfmm::ForceFields fields;
  fields.group_number = kfmm::ScalarView<std::int64_t, kfmm::HostSpace>("group_number", n);
  std::uint64_t offset = 0;
  MPI_Exscan(&local, &offset, 1, MPI_UINT64_T, MPI_SUM, world.comm());
  if (world.is_root()) offset = 0;
  for (std::size_t i = 0; i < n; ++i) {
    for (int k = 0; k < 3; ++k) particles.pos(i, k) = particles.vel(i, k) = double(i + k);
    particles.mass(i) = 1;
    particles.id(i) = offset + i + 1;
    fields.group_number(i) = (offset + i) % 3 == 2 ? -1 : std::int64_t((offset + i) % 3);
  }
  std::string const path = (dir / "groups.hdf5").string();
  kfmm::write_particles(world, path, particles, kfmm::SnapshotHeader{}, kfmm::ParticleFileOptions{}, &fields);
  EXPECT_EQ(python("import h5py, numpy as np\n"
                   "p = h5py.File('" + path + "', 'r')['PartType1']\n"
                   "ids = p['ParticleIDs'][:]; nr = p['GroupNr'][:]\n"
                   "assert nr.dtype == np.int64 and len(nr) == " + std::to_string(total) + "\n"
                   "expected = np.where((ids - 1) % 3 == 2, -1, (ids - 1) % 3)\n"
                   "assert (nr == expected).all()\n"),
            0);
}

}  // namespace
