// GADGET-4 HDF5 particle files: round trips at any rank count, reading with a different rank
// count, zero-particle ranks, force fields, atomic replacement, malformed input, and
// interoperability with h5py (files made and checked by make_gadget4_file.py).
#include <kfmm/comm/context.hpp>
#include <kfmm/core/fault_injection.hpp>
#include <kfmm/io/particle_file.hpp>

#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using kfmm::Context;
using kfmm::FileLayout;
using kfmm::HostSpace;
using kfmm::ParticleFileOptions;
using kfmm::Particles;
using kfmm::Precision;
using kfmm::SnapshotHeader;

// ---------------------------------------------------------------- deterministic particles

/// Particle with global index g; values are not representable in float.
struct Expected {
  double pos[3], vel[3], mass, potential, acceleration[3];
  std::uint64_t id;
};

Expected expected(std::uint64_t g) {
  double const x = static_cast<double>(g);
  Expected e{};
  e.pos[0] = std::sin(0.7 * x) * 10 + 1.0 / 3;
  e.pos[1] = std::cos(1.3 * x);
  e.pos[2] = 1e-3 * x + 0.1;
  e.vel[0] = -x / 7;
  e.vel[1] = std::sqrt(x + 0.5);
  e.vel[2] = 0.3;
  e.mass = 1 + (g % 5) / 3.0;
  e.potential = -1 / (x + 3.0);
  e.acceleration[0] = x / 11;
  e.acceleration[1] = -2.0 / 3;
  e.acceleration[2] = std::exp(-x / 100);
  e.id = 1000 + 7 * g;
  return e;
}

std::uint64_t slice_begin(std::uint64_t n, int rank, int ranks) { return n * rank / ranks; }

/// This rank's contiguous slice of n particles, in global order.
Particles<HostSpace> make_particles(Context const& context, std::uint64_t n) {
  std::uint64_t const begin = slice_begin(n, context.rank(), context.size());
  std::uint64_t const end = slice_begin(n, context.rank() + 1, context.size());
  Particles<HostSpace> p(end - begin);
  p.num = end - begin;
  p.num_total = n;
  for (std::size_t i = 0; i < p.num; ++i) {
    Expected const e = expected(begin + i);
    for (int k = 0; k < 3; ++k) {
      p.pos(i, k) = e.pos[k];
      p.vel(i, k) = e.vel[k];
    }
    p.mass(i) = e.mass;
    p.id(i) = e.id;
  }
  return p;
}

kfmm::ForceFields make_fields(Particles<HostSpace> const& p) {
  kfmm::ForceFields f{kfmm::ScalarView<double, HostSpace>("potential", p.num),
                      kfmm::Vec3View<double, HostSpace>("acceleration", p.num)};
  for (std::size_t i = 0; i < p.num; ++i) {
    Expected const e = expected((p.id(i) - 1000) / 7);
    f.potential(i) = e.potential;
    for (int k = 0; k < 3; ++k) f.acceleration(i, k) = e.acceleration[k];
  }
  return f;
}

double stored(double value, Precision precision) {
  return precision == Precision::Float ? static_cast<double>(static_cast<float>(value)) : value;
}

/// Checks that `p` is slice [N r/R, N (r+1)/R) of the written set, values as stored with `precision`.
void expect_slice(Context const& context, Particles<HostSpace> const& p, std::uint64_t n, Precision precision,
                  kfmm::ForceFields const* fields = nullptr) {
  std::uint64_t const begin = slice_begin(n, context.rank(), context.size());
  ASSERT_EQ(p.num, slice_begin(n, context.rank() + 1, context.size()) - begin);
  ASSERT_EQ(p.num_total, n);
  for (std::size_t i = 0; i < p.num; ++i) {
    Expected const e = expected(begin + i);
    ASSERT_EQ(p.id(i), e.id) << "row " << begin + i;
    for (int k = 0; k < 3; ++k) {
      ASSERT_EQ(p.pos(i, k), stored(e.pos[k], precision)) << "id " << e.id;
      ASSERT_EQ(p.vel(i, k), stored(e.vel[k], precision)) << "id " << e.id;
    }
    ASSERT_EQ(p.mass(i), stored(e.mass, precision)) << "id " << e.id;
    if (fields) {
      ASSERT_EQ(fields->potential(i), stored(e.potential, precision));
      for (int k = 0; k < 3; ++k) ASSERT_EQ(fields->acceleration(i, k), stored(e.acceleration[k], precision));
    }
  }
}

// ---------------------------------------------------------------- files and python

/// A directory shared by all ranks, removed at the end of the test.
class ParticleFileTest : public testing::Test {
 protected:
  Context world{MPI_COMM_WORLD};
  fs::path dir;

  void SetUp() override {
    long long token = getpid();
    MPI_Bcast(&token, 1, MPI_LONG_LONG, 0, world.comm());
    auto const* info = testing::UnitTest::GetInstance()->current_test_info();
    dir = fs::temp_directory_path() / ("kfmm_io_test_" + std::to_string(token)) /
          (std::string(info->test_suite_name()) + "." + info->name());
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

  /// Runs make_gadget4_file.py with `arguments` on rank 0; every rank gets its exit status.
  int run_python(std::string const& arguments) {
    std::string const python = python_with_h5py();
    int status = 0;
    if (world.is_root()) {
      fs::path const script = fs::path(__FILE__).parent_path() / "make_gadget4_file.py";
      status = std::system((python + " " + script.string() + " " + arguments).c_str());
    }
    MPI_Bcast(&status, 1, MPI_INT, 0, world.comm());
    return status;
  }

  /// The first of `python3` and the system's /usr/bin/python3 that imports h5py (pyenv and
  /// virtualenvs often shadow the Debian python3 that python3-h5py installs into).
  std::string python_with_h5py() {
    static std::string found;
    static bool searched = false;
    if (!searched) {
      int index = -1;
      char const* candidates[] = {"python3", "/usr/bin/python3"};
      if (world.is_root())
        for (int i = 0; i < 2 && index < 0; ++i)
          if (std::system((std::string(candidates[i]) + " -c 'import h5py, numpy' >/dev/null 2>&1").c_str()) == 0)
            index = i;
      MPI_Bcast(&index, 1, MPI_INT, 0, world.comm());
      searched = true;
      if (index >= 0) found = candidates[index];
    }
    if (found.empty())
      ADD_FAILURE() << "neither python3 nor /usr/bin/python3 can import h5py and numpy; install python3-h5py "
                       "(scripts/setup.sh does) to run the GADGET-4 interoperability tests";
    return found.empty() ? "python3" : found;
  }

  std::string path(std::string const& name) const { return (dir / name).string(); }

  /// Expects read_particles(file) to throw a kfmm::Error whose message contains every fragment.
  void expect_read_error(std::string const& file, std::vector<std::string> const& fragments, bool header = false) {
    try {
      SnapshotHeader read_header;
      kfmm::read_particles(world, file, header ? &read_header : nullptr);
      ADD_FAILURE() << "reading " << file << " did not throw";
    } catch (kfmm::Error const& e) {
      std::string const message = e.what();
      for (auto const& fragment : fragments)
        EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' not in: " << message;
    }
  }
};

SnapshotHeader make_header() {
  SnapshotHeader h;
  h.time = 1.25;
  h.redshift = 0.5;
  h.box_size = 0;
  h.units = kfmm::UnitSystem::astro(1.0, 1.0, 1e10);
  h.parameters = {{"NumSteps", std::int64_t{12}},
                  {"BigCount", std::int64_t{1} << 40},
                  {"ErrTolTheta", 0.8},
                  {"RunName", std::string("unit-test")}};
  h.config = {{"EVALPOTENTIAL", std::string("")}, {"DOUBLEPRECISION", 1.0}};
  return h;
}

// ---------------------------------------------------------------- tests

TEST_F(ParticleFileTest, SnapshotPathAndLayoutNames) {
  EXPECT_EQ(kfmm::snapshot_path("out", 7, FileLayout::SingleFile), "out/snapshot_007.hdf5");
  EXPECT_EQ(kfmm::snapshot_path("out", 1234, FileLayout::FilePerRank), "out/snapdir_1234");
  EXPECT_EQ(kfmm::parse_file_layout("per-rank"), FileLayout::FilePerRank);
  EXPECT_EQ(kfmm::parse_file_layout("single"), FileLayout::SingleFile);
  EXPECT_THROW(kfmm::parse_file_layout("multi"), kfmm::Error);
}

TEST_F(ParticleFileTest, RoundTripIsBitwiseInDoubleAndRoundedInFloat) {
  std::uint64_t const n = 1001;
  auto const particles = make_particles(world, n);
  SnapshotHeader const header = make_header();
  for (auto layout : {FileLayout::SingleFile, FileLayout::FilePerRank})
    for (auto precision : {Precision::Double, Precision::Float})
      for (int compression : {0, 4}) {
        SCOPED_TRACE(testing::Message() << "layout " << int(layout) << " precision " << int(precision)
                                        << " compression " << compression);
        std::string const file = kfmm::snapshot_path(dir.string(), compression, layout);
        kfmm::write_particles(world, file, particles, header, ParticleFileOptions{layout, precision, compression});
        SnapshotHeader back;
        auto const read = kfmm::read_particles(world, file, &back);
        expect_slice(world, read, n, precision);
        EXPECT_EQ(back.time, header.time);
        EXPECT_EQ(back.redshift, header.redshift);
        EXPECT_EQ(back.units.name, "astro");
        EXPECT_EQ(back.units.length_in_cm, header.units.length_in_cm);
        EXPECT_EQ(back.units.mass_in_g, header.units.mass_in_g);
        EXPECT_EQ(back.units.G, header.units.G);
        // Parameters come back in name order, without the unit ones.
        ASSERT_EQ(back.parameters.size(), 4u);
        EXPECT_EQ(back.parameters[0].first, "BigCount");
        EXPECT_EQ(std::get<std::int64_t>(back.parameters[0].second), std::int64_t{1} << 40);
        EXPECT_EQ(std::get<double>(back.parameters[1].second), 0.8);
        EXPECT_EQ(std::get<std::int64_t>(back.parameters[2].second), 12);
        EXPECT_EQ(std::get<std::string>(back.parameters[3].second), "unit-test");
        ASSERT_EQ(back.config.size(), 2u);
        EXPECT_EQ(back.config[1].first, "EVALPOTENTIAL");
        EXPECT_EQ(std::get<std::string>(back.config[1].second), "");
        if (layout == FileLayout::FilePerRank && world.is_root())  // one file per writing rank
          EXPECT_EQ(std::distance(fs::directory_iterator(file), fs::directory_iterator{}), world.size());
      }
}

TEST_F(ParticleFileTest, ReadsWithFewerRanksThanWrote) {
  std::uint64_t const n = 777;
  auto const particles = make_particles(world, n);
  int const readers = std::max(1, world.size() - 1);
  MPI_Comm sub;
  MPI_Comm_split(world.comm(), world.rank() < readers ? 0 : MPI_UNDEFINED, world.rank(), &sub);
  for (auto layout : {FileLayout::SingleFile, FileLayout::FilePerRank})
    for (int compression : {0, 6}) {
      std::string const file = kfmm::snapshot_path(dir.string(), compression, layout);
      kfmm::write_particles(world, file, particles, make_header(),
                            ParticleFileOptions{layout, Precision::Double, compression});
      if (sub != MPI_COMM_NULL) {
        Context const subset(sub);
        ASSERT_EQ(subset.size(), readers);
        // Pass one member file of the set, not the directory: the reader finds the others.
        std::string const any_file =
            layout == FileLayout::SingleFile ? file : file + "/snapshot_00" + std::to_string(compression) + ".0.hdf5";
        auto const read = kfmm::read_particles(subset, any_file);
        expect_slice(subset, read, n, Precision::Double);
        std::uint64_t local = read.num, total = 0, id_sum = 0, local_sum = 0;
        for (std::size_t i = 0; i < read.num; ++i) local_sum += read.id(i);
        MPI_Allreduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, sub);
        MPI_Allreduce(&local_sum, &id_sum, 1, MPI_UINT64_T, MPI_SUM, sub);
        EXPECT_EQ(total, n);
        EXPECT_EQ(id_sum, 1000 * n + 7 * n * (n - 1) / 2);
      }
      MPI_Barrier(world.comm());
    }
  if (sub != MPI_COMM_NULL) MPI_Comm_free(&sub);
}

TEST_F(ParticleFileTest, RanksWithoutParticlesTakePart) {
  for (std::uint64_t n : {std::uint64_t{2}, std::uint64_t{0}})
    for (auto layout : {FileLayout::SingleFile, FileLayout::FilePerRank})
      for (int compression : {0, 1}) {
        auto const particles = make_particles(world, n);
        std::string const file = path("n" + std::to_string(n) + "_" + std::to_string(int(layout)) + "_" +
                                      std::to_string(compression) + ".hdf5");
        kfmm::write_particles(world, file, particles, SnapshotHeader{},
                              ParticleFileOptions{layout, Precision::Double, compression});
        auto const read = kfmm::read_particles(world, file);
        expect_slice(world, read, n, Precision::Double);
      }
}

TEST_F(ParticleFileTest, ForceFieldsRoundTrip) {
  std::uint64_t const n = 123;
  auto const particles = make_particles(world, n);
  auto const fields = make_fields(particles);
  for (auto precision : {Precision::Double, Precision::Float}) {
    std::string const file = path("forces.hdf5");
    kfmm::write_particles(world, file, particles, SnapshotHeader{},
                          ParticleFileOptions{FileLayout::SingleFile, precision, 3}, &fields);
    kfmm::ForceFields back;
    auto const read = kfmm::read_particles(world, file, nullptr, &back);
    ASSERT_EQ(back.potential.extent(0), read.num);
    ASSERT_EQ(back.acceleration.extent(0), read.num);
    expect_slice(world, read, n, precision, &back);
  }
  // Without Potential/Acceleration in the file the fields come back empty.
  std::string const plain = path("plain.hdf5");
  kfmm::write_particles(world, plain, particles, SnapshotHeader{}, ParticleFileOptions{});
  kfmm::ForceFields back = make_fields(particles);
  kfmm::read_particles(world, plain, nullptr, &back);
  EXPECT_EQ(back.potential.extent(0), 0u);
  EXPECT_EQ(back.acceleration.extent(0), 0u);
}

TEST_F(ParticleFileTest, ExtraDatasetsAreWrittenRowsInRankOrder) {
  std::uint64_t const n = 57;
  auto const particles = make_particles(world, n);
  std::uint64_t const begin = slice_begin(n, world.rank(), world.size());
  kfmm::ForceFields fields;
  kfmm::ExtraDataset values{"Pairs", 2, false, {}, {}};
  kfmm::ExtraDataset integers{"Labels", 3, true, {}, {}};
  for (std::size_t i = 0; i < particles.num; ++i) {
    values.values.push_back(0.5 * double(begin + i));
    values.values.push_back(-1.0 * double(begin + i));
    for (int c = 0; c < 3; ++c) integers.integers.push_back(10 * (begin + i) + c);
  }
  fields.extra = {values, integers};
  std::string const file = path("extra.hdf5");
  kfmm::write_particles(world, file, particles, SnapshotHeader{}, ParticleFileOptions{FileLayout::SingleFile, Precision::Double, 0},
                        &fields);
  if (world.is_root()) {
    hid_t const f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    std::vector<double> pairs(2 * n);
    std::vector<std::uint64_t> labels(3 * n);
    hid_t const d1 = H5Dopen2(f, "/PartType1/Pairs", H5P_DEFAULT);
    hid_t const d2 = H5Dopen2(f, "/PartType1/Labels", H5P_DEFAULT);
    ASSERT_GE(H5Dread(d1, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, pairs.data()), 0);
    ASSERT_GE(H5Dread(d2, H5T_NATIVE_UINT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, labels.data()), 0);
    H5Dclose(d1);
    H5Dclose(d2);
    H5Fclose(f);
    for (std::uint64_t r = 0; r < n; ++r) {
      EXPECT_EQ(pairs[2 * r], 0.5 * double(r));
      EXPECT_EQ(pairs[2 * r + 1], -1.0 * double(r));
      for (int c = 0; c < 3; ++c) EXPECT_EQ(labels[3 * r + c], 10 * r + c);
    }
  }
  // A dataset with the wrong number of values is an error on every rank.
  fields.extra[0].values.push_back(1.0);
  EXPECT_THROW(kfmm::write_particles(world, path("bad_extra.hdf5"), particles, SnapshotHeader{}, ParticleFileOptions{},
                                     &fields),
               kfmm::Error);
}

TEST_F(ParticleFileTest, FailedWriteLeavesNoFileAndKeepsTheOldOne) {
  auto const old_particles = make_particles(world, 10);
  auto const new_particles = make_particles(world, 20);
  for (auto layout : {FileLayout::SingleFile, FileLayout::FilePerRank}) {
    std::string const fresh = kfmm::snapshot_path(dir.string(), 1, layout);
    std::string const existing = kfmm::snapshot_path(dir.string(), 2, layout);
    ParticleFileOptions const options{layout, Precision::Double, 0};
    kfmm::write_particles(world, existing, old_particles, SnapshotHeader{}, options);
    // Datasets are written in the order Coordinates, Velocities, ParticleIDs, Masses: fail on
    // every rank after the first and after the last.
    for (char const* rule : {"snapshot.dataset:1:*:throw", "snapshot.dataset:4:*:throw"}) {
      for (auto const& target : {fresh, existing}) {
        kfmm::fault_injection::arm(rule);
        try {
          kfmm::write_particles(world, target, new_particles, SnapshotHeader{}, options);
          ADD_FAILURE() << "the injected failure did not throw";
        } catch (kfmm::Error const& e) {
          EXPECT_NE(std::string(e.what()).find("injected failure at fault point 'snapshot.dataset'"),
                    std::string::npos)
              << e.what();
        }
      }
      kfmm::fault_injection::arm("");
      MPI_Barrier(world.comm());
      EXPECT_FALSE(fs::exists(fresh));
      expect_slice(world, kfmm::read_particles(world, existing), 10, Precision::Double);
    }
    // A successful write replaces the old snapshot.
    kfmm::write_particles(world, existing, new_particles, SnapshotHeader{}, options);
    expect_slice(world, kfmm::read_particles(world, existing), 20, Precision::Double);
  }
  MPI_Barrier(world.comm());
  if (world.is_root())  // no temporaries left behind
    for (auto const& entry : fs::directory_iterator(dir))
      EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST_F(ParticleFileTest, ReadsAFileWrittenTheGadget4Way) {
  std::string const file = path("gadget4.hdf5");
  std::uint64_t const n = 50;
  ASSERT_EQ(run_python("make gadget4 " + file + " " + std::to_string(n)), 0);
  SnapshotHeader header;
  auto const p = kfmm::read_particles(world, file, &header);
  std::uint64_t const begin = slice_begin(n, world.rank(), world.size());
  ASSERT_EQ(p.num_total, n);
  ASSERT_EQ(p.num, slice_begin(n, world.rank() + 1, world.size()) - begin);
  for (std::size_t i = 0; i < p.num; ++i) {
    double const g = static_cast<double>(begin + i);
    EXPECT_EQ(p.id(i), begin + i + 1);  // uint32 ids widened
    EXPECT_EQ(p.pos(i, 0), g / 2);
    EXPECT_EQ(p.pos(i, 1), -g);
    EXPECT_EQ(p.pos(i, 2), g / 4);
    EXPECT_EQ(p.vel(i, 2), 3 * g / 8);
    EXPECT_EQ(p.mass(i), 0.125);  // from MassTable[1]
  }
  EXPECT_EQ(header.time, 0.5);
  EXPECT_EQ(header.units.length_in_cm, 3.085678e21);
  EXPECT_EQ(header.units.velocity_in_cm_per_s, 1e5);
  // GravityConstantInternal = 0: G from the units with GADGET-4's G = 6.6738e-8 cgs (≈ 43019).
  double const G = 6.6738e-8 * 1.989e43 / (3.085678e21 * 1e5 * 1e5);
  EXPECT_NEAR(header.units.G, G, 1e-12 * G);
  ASSERT_EQ(header.parameters.size(), 3u);
  EXPECT_EQ(std::get<double>(header.parameters[0].second), 0.5);            // ErrTolTheta
  EXPECT_EQ(std::get<std::int64_t>(header.parameters[1].second), 2000);     // MaxMemSize (int32)
  EXPECT_EQ(std::get<std::string>(header.parameters[2].second), "snapshot");  // fixed-length string
  ASSERT_EQ(header.config.size(), 2u);
  EXPECT_EQ(header.config[1].first, "FMM");
}

TEST_F(ParticleFileTest, WrittenFileHasGadget4LayoutForH5py) {
  std::uint64_t const n = 64;
  auto const particles = make_particles(world, n);
  auto const fields = make_fields(particles);
  for (auto precision : {Precision::Float, Precision::Double}) {
    std::string const file = path("for_h5py.hdf5");
    kfmm::write_particles(world, file, particles, make_header(),
                          ParticleFileOptions{FileLayout::SingleFile, precision, 0}, &fields);
    char const* name = precision == Precision::Float ? "float" : "double";
    EXPECT_EQ(run_python("check " + file + " " + std::to_string(n) + " " + name + " fields"), 0);
  }
}

TEST_F(ParticleFileTest, MalformedInputIsAClearError) {
  expect_read_error(path("missing.hdf5"), {"missing.hdf5", "does not exist"});
  struct Case {
    char const* variant;
    std::vector<std::string> fragments;
  };
  std::vector<Case> const cases = {
      {"not_hdf5", {"not an HDF5 file"}},
      {"missing_header", {"no group /Header"}},
      {"missing_velocities", {"no dataset /PartType1/Velocities"}},
      {"coordinates_2d", {"/PartType1/Coordinates", "shape (20, 2)", "expected (20, 3)"}},
      {"count_mismatch", {"NumPart_Total[1] = 21", "hold 20 particles"}},
      {"nan_coordinate", {"/PartType1/Coordinates", "particle id 4", "not finite"}},
      {"negative_mass", {"particle id 3", "mass", "-1"}},
      {"no_masses", {"no dataset /PartType1/Masses", "MassTable[1] = 0"}},
  };
  for (auto const& c : cases) {
    SCOPED_TRACE(c.variant);
    std::string const file = path(std::string(c.variant) + ".hdf5");
    ASSERT_EQ(run_python(std::string("make ") + c.variant + " " + file + " 20"), 0);
    auto fragments = c.fragments;
    fragments.push_back(file);  // every message names the file
    expect_read_error(file, fragments);
  }
}

TEST_F(ParticleFileTest, RepeatedIdsAreRejectedRenumberedOrKept) {
  // Global rows 250 and 120 take the ids of rows 5 and 40: the smallest repeated id is row
  // 5's, and the message must not depend on the rank count (files read at 1-4 ranks).
  std::uint64_t const n = 301;
  auto particles = make_particles(world, n);
  std::uint64_t const begin = slice_begin(n, world.rank(), world.size());
  for (auto [row, copy_of] : {std::pair<std::uint64_t, std::uint64_t>{250, 5}, {120, 40}})
    if (row >= begin && row < begin + particles.num) particles.id(row - begin) = expected(copy_of).id;
  std::string const file = path("repeated.hdf5");
  kfmm::write_particles(world, file, particles, SnapshotHeader{}, ParticleFileOptions{});
  expect_read_error(file, {file, "/PartType1/ParticleIDs repeats ids: id 1035 at rows 5 and 250 (2 repeats in all)",
                           "--duplicate-ids renumber", "ic.duplicate_ids: renumber"});

  auto const renumbered =
      kfmm::read_particles(world, file, nullptr, nullptr, kfmm::DuplicateIdPolicy::Renumber);
  ASSERT_EQ(renumbered.num, particles.num);
  for (std::size_t i = 0; i < renumbered.num; ++i) EXPECT_EQ(renumbered.id(i), begin + i + 1);

  auto const kept = kfmm::read_particles(world, file, nullptr, nullptr, kfmm::DuplicateIdPolicy::Keep);
  for (std::size_t i = 0; i < kept.num; ++i) EXPECT_EQ(kept.id(i), particles.id(i));
}

// Found by fuzz_tests/fuzz_particle_file: each of these files was read without an error (fill
// values for unwritten rows, a negative id clipped to 0, NaN units and time passed on), made
// the reader allocate for 2^40 particles, or overflowed the one value read from an array
// attribute. The messages name the file, the item and the value.
TEST_F(ParticleFileTest, FuzzFindingsAreClearErrors) {
  struct Case {
    char const* variant;
    std::vector<std::string> fragments;
    bool header;
  };
  std::vector<Case> const cases = {
      {"unwritten_coordinates", {"/PartType1/Coordinates", "declares 20 rows but stores none", "write the file again"}, false},
      {"huge_unwritten", {"/PartType1/Coordinates", "declares 1099511627776 rows but stores none"}, false},
      {"negative_ids", {"/PartType1/ParticleIDs", "negative id -5", "row 5"}, false},
      {"array_parameter", {"/Parameters/MaxMemSize", "has 3 values", "single-valued"}, true},
      {"nan_unit", {"/Parameters UnitLength_in_cm = nan", "finite and > 0"}, true},
      {"infinite_time", {"/Header Time = inf", "not finite"}, true},
      {"zero_gravity_units", {"gravitational constant is 0", "UnitMass_in_g"}, true},
  };
  for (auto const& c : cases) {
    SCOPED_TRACE(c.variant);
    std::string const file = path(std::string(c.variant) + ".hdf5");
    ASSERT_EQ(run_python(std::string("make ") + c.variant + " " + file + " 20"), 0);
    auto fragments = c.fragments;
    fragments.push_back(file);
    expect_read_error(file, fragments, c.header);
  }
  // Signed ids that are all ≥ 0 are read as they are.
  std::string const file = path("signed_ids.hdf5");
  ASSERT_EQ(run_python("make signed_ids " + file + " 20"), 0);
  auto const p = kfmm::read_particles(world, file);
  EXPECT_EQ(p.num_total, 20u);
  std::uint64_t const begin = slice_begin(20, world.rank(), world.size());
  for (std::size_t i = 0; i < p.num; ++i) EXPECT_EQ(p.id(i), begin + i + 1);
}

}  // namespace
