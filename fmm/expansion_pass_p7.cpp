// Instantiates the expansion passes of order 7 (float and double, both kernels).
#include <kfmm/fmm/expansion_pass_impl.hpp>

namespace kfmm::detail {
template std::unique_ptr<ExpansionPass> make_pass_of_order<7>(Precision, SofteningKind, double);
}  // namespace kfmm::detail
