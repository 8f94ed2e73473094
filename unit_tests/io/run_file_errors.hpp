#pragma once
// Helpers of the run-file tests: the error a text gives, and the parts its message must name.
#include <kfmm/core/error.hpp>
#include <kfmm/io/run_file.hpp>

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

namespace kfmm::test_support {

/// The message of the kfmm::Error that parsing `text` throws (fails the test if none).
inline std::string run_file_error_of(std::string const& text) {
  try {
    kfmm::parse_run_text(text, "bad.yaml");
  } catch (kfmm::Error const& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << text;
  return {};
}

inline void expect_contains(std::string const& message, std::initializer_list<char const*> parts) {
  for (char const* part : parts) EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

}  // namespace kfmm::test_support
