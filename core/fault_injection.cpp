#include <kfmm/core/fault_injection.hpp>

#include <kfmm/core/error.hpp>

#include <mpi.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace kfmm::fault_injection {

namespace detail {
int mode = -1;
}

namespace {

enum class Action { Kill, Throw };

struct Rule {
  std::string point;
  long long occurrence = 0;
  int rank = -1;  // every rank
  Action action = Action::Kill;
  long long reached = 0;
};

std::vector<Rule> rules;

std::vector<std::string> split(std::string const& text, char separator) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    std::size_t const end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

long long parse_integer(std::string const& text, std::string const& rule, char const* what, long long minimum) {
  char* end = nullptr;
  long long const value = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < minimum)
    fail("fault injection rule '{}': {} '{}' is not an integer ≥ {}; write <point>:<n>[:<rank>[:kill|throw]]", rule,
         what, text, minimum);
  return value;
}

std::vector<Rule> parse(std::string const& spec) {
  std::vector<Rule> parsed;
  if (spec.empty()) return parsed;
  for (auto const& text : split(spec, ',')) {
    auto const fields = split(text, ':');
    if (fields.size() < 2 || fields.size() > 4 || fields[0].empty())
      fail("fault injection rule '{}' has {} fields; write <point>:<n>[:<rank>[:kill|throw]]", text, fields.size());
    Rule rule;
    rule.point = fields[0];
    rule.occurrence = parse_integer(fields[1], text, "occurrence", 1);
    if (fields.size() > 2 && fields[2] != "*")
      rule.rank = static_cast<int>(parse_integer(fields[2], text, "rank", 0));
    if (fields.size() > 3) {
      if (fields[3] == "throw") rule.action = Action::Throw;
      else if (fields[3] != "kill")
        fail("fault injection rule '{}': unknown action '{}'; use kill or throw", text, fields[3]);
    }
    parsed.push_back(rule);
  }
  return parsed;
}

int world_rank() {
  int initialised = 0, finalised = 0;
  MPI_Initialized(&initialised);
  MPI_Finalized(&finalised);
  int rank = 0;
  if (initialised && !finalised) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

}  // namespace

void arm(std::string const& spec) {
  rules = parse(spec);
  detail::mode = rules.empty() ? 0 : 1;
}

void read_environment() {
  detail::mode = 0;  // a bad variable is reported once, not at every point
  char const* spec = std::getenv("KFMM_FAULT_INJECTION");
  try {
    arm(spec ? spec : "");
  } catch (Error const& e) {
    fail("KFMM_FAULT_INJECTION = '{}': {} (a testing facility: unset it for real runs)", spec, e.what());
  }
}

namespace detail {

void reached(char const* point) {
  if (mode < 0) read_environment();
  for (auto& rule : rules) {
    if (rule.point != point || ++rule.reached != rule.occurrence) continue;
    int const rank = world_rank();
    if (rule.rank >= 0 && rule.rank != rank) continue;
    // stderr is unbuffered: the note reaches the log although the process dies next.
    std::fprintf(stderr, "kfmm: fault injection: %s at '%s' (occurrence %lld) on rank %d\n",
                 rule.action == Action::Kill ? "SIGKILL" : "failure", point, rule.occurrence, rank);
    if (rule.action == Action::Kill) std::raise(SIGKILL);
    fail("injected failure at fault point '{}' (occurrence {}) on rank {} (KFMM_FAULT_INJECTION)", point,
         rule.occurrence, rank);
  }
}

}  // namespace detail

}  // namespace kfmm::fault_injection
