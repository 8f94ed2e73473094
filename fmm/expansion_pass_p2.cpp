// Instantiates the expansion passes of order 2 (float and double, both kernels).
#include <kfmm/fmm/expansion_pass_impl.hpp>

namespace kfmm::detail {
template std::unique_ptr<ExpansionPass> make_pass_of_order<2>(Precision, SofteningKind, double);
}  // namespace kfmm::detail
