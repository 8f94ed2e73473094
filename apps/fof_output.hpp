#pragma once
// The catalogue of `kfmm fof` and of `kfmm run` with output.fof, as the fof_tab file's table.
#include <kfmm/io/fof_file.hpp>
#include <kfmm/neighbors/fof_catalogue.hpp>

namespace kfmm::app {

/// Rank 0's gathered catalogue as a FoFTable (other ranks: empty columns, same totals).
inline FoFTable fof_table(FoFCatalogue<HostSpace> const& all, double time, double redshift, double box_size,
                          double linking_length, double b, std::uint64_t min_members) {
  FoFTable table;
  table.time = time;
  table.redshift = redshift;
  table.box_size = box_size;
  table.linking_length = linking_length;
  table.b = b;
  table.min_members = min_members;
  table.num_members_total = all.num_members_total;
  bool const most_bound = all.most_bound_id.extent(0) == all.num && all.num > 0;
  for (std::size_t g = 0; g < all.num; ++g) {
    table.length.push_back(all.length(g));
    table.min_id.push_back(all.label(g));
    table.mass.push_back(all.mass(g));
    table.velocity_dispersion.push_back(all.velocity_dispersion(g));
    table.half_mass_radius.push_back(all.half_mass_radius(g));
    for (int k = 0; k < 3; ++k) {
      table.pos.push_back(all.pos(g, k));
      table.vel.push_back(all.vel(g, k));
    }
    if (most_bound) table.most_bound_id.push_back(all.most_bound_id(g));
  }
  return table;
}

}  // namespace kfmm::app
