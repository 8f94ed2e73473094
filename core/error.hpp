#pragma once
/// \file
/// \brief The one exception type of kfmm's host API.
#include <kfmm/core/format.hpp>

#include <stdexcept>
#include <string>

namespace kfmm {

/// \brief Thrown by host-side API for bad input, impossible configurations and resource
/// shortfalls. The message names the problem, the offending value, the limit and the fix.
class Error : public std::runtime_error {
 public:
  explicit Error(std::string const& message) : std::runtime_error(message) {}
};

/// Throws kfmm::Error with a fmt-formatted message.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kfmm
