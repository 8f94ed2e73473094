#include <kfmm/integrate/forces.hpp>

#include <kfmm/fmm/direct.hpp>
#include <kfmm/fmm/solver.hpp>

namespace kfmm {

ForceFunction fmm_forces(ForceSolver& solver) {
  return [&solver](Particles<MemorySpace>& particles, ScalarView<double>& potential, Vec3View<double>& acceleration) {
    solver.compute(particles);
    potential = solver.potential();
    acceleration = solver.acceleration();
  };
}

ForceFunction direct_forces(Context const& context, SofteningKind softening, double softening_length, double G) {
  return [context, softening, softening_length, G](Particles<MemorySpace>& particles, ScalarView<double>& potential,
                                                   Vec3View<double>& acceleration) {
    direct_sum_all(context, particles, softening, softening_length, G, potential, acceleration);
  };
}

}  // namespace kfmm
