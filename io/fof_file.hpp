#pragma once
/// \file
/// \brief Friends-of-friends group catalogues as GADGET-4 `fof_tab_NNN.hdf5` files.
#include <kfmm/comm/context.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace kfmm {

/// \brief A group catalogue on the host, groups in catalogue order (GADGET-4's group number).
/// Only rank 0's table is written; other ranks pass an empty one.
struct FoFTable {
  double time = 0, redshift = 0, box_size = 0;
  double linking_length = 0;
  double b = 0;                        ///< linking parameter (0: the length was given directly)
  std::uint64_t min_members = 0;
  std::uint64_t num_members_total = 0; ///< particles in all groups (Nids_Total)
  std::vector<std::uint64_t> length;   ///< members per group
  std::vector<std::uint64_t> min_id;   ///< smallest ParticleID (the FoF label)
  std::vector<std::uint64_t> most_bound_id;  ///< empty, or one per group (UINT64_MAX: not computed)
  std::vector<double> mass, velocity_dispersion, half_mass_radius;
  std::vector<double> pos, vel;        ///< 3 per group
};

/// \brief Writes `table` (rank 0's) as one GADGET-4 format-3 group catalogue. Collective.
///
/// Layout: /Header attributes Ngroups_ThisFile, Ngroups_Total, Nids_ThisFile, Nids_Total
/// (int64; Nids = particles in the groups), Nsubhalos_ThisFile = Nsubhalos_Total = 0,
/// NumFiles = 1, Time, Redshift, BoxSize; /Parameters attributes FOF_LinkingLength,
/// FOF_LinkingParameter (b, 0 when the length was given), FOF_GroupMinLen; /Group datasets
/// (GADGET-4 names) GroupLen (int32), GroupLenType (N,6 int32, type 1 only), GroupMass,
/// GroupMassType (N,6), GroupPos (N,3, centre of mass), GroupVel (N,3, mean velocity), and kfmm's
/// GroupMinID (uint64, the group's label), GroupVelDisp (1-D dispersion), GroupHalfmassRad,
/// GroupMostBoundID (uint64, when computed); reals as float64. No /Subhalo group, no ID block.
/// Written under a temporary name and renamed; errors (a group longer than 2^31 − 1, an
/// unwritable path) are agreed across ranks and thrown as kfmm::Error.
void write_fof_table(Context const& context, std::string const& path, FoFTable const& table);

}  // namespace kfmm
