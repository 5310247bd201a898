#include "mimic/distributed/environment.h"

#include <charconv>
#include <cstdlib>
#include <optional>
#include <vector>

#include "mimic/core/error.h"

namespace mimic::distributed {

namespace {

const char* const kRequired[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"};

// Largest WORLD_SIZE accepted: far above any CPU cluster mimic could use, small enough that a typo is caught.
constexpr int kMaxWorld = 65536;

// Decimal digits only: "1e3", " 2", "+1" or "0x10" in a launcher's environment are mistakes, not numbers.
int integer_in(const char* name, const char* value, int lo, int hi, const std::string& why = "") {
  const std::string s = value;
  int v = 0;
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, v);
  const bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || ec != std::errc() || ptr != end || v < lo || v > hi)
    fail("environment variable ", name, "='", s, "': must be an integer in [", lo, ", ", hi, "]", why.empty() ? "" : " (" + why + ")");
  return v;
}

}  // namespace

Environment read_environment(const std::function<const char*(const char*)>& getenv) {
  Environment e;
  std::vector<std::string> set, missing;
  for (const char* name : kRequired) (getenv(name) ? set : missing).push_back(name);
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  };
  if (const char* t = getenv("MIMIC_DIST_TIMEOUT"))
    e.timeout_seconds = integer_in("MIMIC_DIST_TIMEOUT", t, 1, 86400, "seconds a rendezvous or a collective waits for a peer");
  if (set.empty()) return e;
  MIMIC_CHECK(missing.empty(), "a distributed run needs all of RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (or none): ",
              list(set), " set, ", list(missing), " missing");
  e.world_size = integer_in("WORLD_SIZE", getenv("WORLD_SIZE"), 1, kMaxWorld, "processes in the run");
  const std::string of_world = "WORLD_SIZE is " + std::to_string(e.world_size);
  e.rank = integer_in("RANK", getenv("RANK"), 0, e.world_size - 1, of_world);
  if (const char* l = getenv("LOCAL_WORLD_SIZE"))
    e.local_world_size = integer_in("LOCAL_WORLD_SIZE", l, 1, e.world_size, "processes on this machine; " + of_world);
  e.local_rank = integer_in("LOCAL_RANK", getenv("LOCAL_RANK"), 0, (getenv("LOCAL_WORLD_SIZE") ? e.local_world_size : e.world_size) - 1,
                            getenv("LOCAL_WORLD_SIZE") ? "LOCAL_WORLD_SIZE is " + std::to_string(e.local_world_size) : of_world);
  e.master_port = integer_in("MASTER_PORT", getenv("MASTER_PORT"), 1, 65535, "rank 0's TCP port for the rendezvous");
  e.master_addr = getenv("MASTER_ADDR");
  MIMIC_CHECK(!e.master_addr.empty() && e.master_addr.size() <= 253 && e.master_addr.find_first_of(" \t\n/") == std::string::npos,
              "environment variable MASTER_ADDR='", e.master_addr, "': must be rank 0's host name or IP address");
  return e;
}

const Environment& environment() {
  static std::optional<Environment> e;
  if (!e) e = read_environment([](const char* name) { return std::getenv(name); });
  return *e;
}

std::string rank_prefix() {
  try {
    const auto& e = environment();
    return e.distributed() ? "rank " + std::to_string(e.rank) + ": " : "";
  } catch (const Error&) {
    return "";
  }
}

int default_threads(int cores) {
  const int local = environment().local_world_size;
  return std::max(1, cores / local);
}

}  // namespace mimic::distributed
