#include <kfmm/fmm/expansion_dispatch.hpp>
#include <kfmm/fmm/expansion_pass.hpp>

namespace kfmm {

namespace detail {
template <int P>
std::unique_ptr<ExpansionPass> make_pass_of_order(Precision precision, SofteningKind kind, double softening_length);
}  // namespace detail

namespace {
template <int P>
struct MakePass {
  static std::unique_ptr<ExpansionPass> run(Precision precision, SofteningKind kind, double softening_length) {
    if constexpr (expansion_order_built(P)) {
      return detail::make_pass_of_order<P>(precision, kind, softening_length);
    } else {
      require_expansion_order_built(P);  // throws
      return nullptr;
    }
  }
};
}  // namespace

std::unique_ptr<ExpansionPass> make_expansion_pass(int order, Precision precision, SofteningKind kind,
                                                   double softening_length) {
  return dispatch_order<MakePass>(order, precision, kind, softening_length);
}

}  // namespace kfmm
