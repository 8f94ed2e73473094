#include <kfmm/core/error.hpp>
#include <kfmm/fmm/softening.hpp>

namespace kfmm {

SofteningKind parse_softening_kind(std::string const& name) {
  if (name == "plummer") return SofteningKind::Plummer;
  if (name == "spline") return SofteningKind::Spline;
  fail("unknown softening kind '{}': valid kinds are plummer, spline", name);
}

std::string to_string(SofteningKind kind) {
  switch (kind) {
    case SofteningKind::Plummer: return "plummer";
    case SofteningKind::Spline: return "spline";
  }
  fail("invalid SofteningKind value {}", static_cast<int>(kind));
}

}  // namespace kfmm
