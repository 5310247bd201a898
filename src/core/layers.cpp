#include "mimic/core/layers.h"

#include <algorithm>
#include <sstream>

#include "mimic/core/error.h"

namespace mimic {

std::vector<int64_t> parse_layers(const std::string& given, int64_t n_layer) {
  std::vector<int64_t> out;
  std::string spec = given;  // "0, 1" is the list 0,1 (the CLI's check drops the blanks the same way)
  spec.erase(std::remove_if(spec.begin(), spec.end(), [](char c) { return c == ' ' || c == '\t'; }), spec.end());
  if (spec.empty() || spec == "all") {
    for (int64_t i = 0; i < n_layer; ++i) out.push_back(i);
    return out;
  }
  std::stringstream ss(spec);
  std::string item;
  auto number = [&](const std::string& s) -> int64_t {
    MIMIC_CHECK(!s.empty() && s.size() < 10 && s.find_first_not_of("0123456789") == std::string::npos, "--layers '", spec,
                "': '", s, "' is not a layer number (give all, or a list like 0,2,4-5)");
    int64_t v = std::stoll(s);
    MIMIC_CHECK(v < n_layer, "--layers '", spec, "': layer ", v, " does not exist (the model has ", n_layer, " layers: 0-",
                n_layer - 1, ")");
    return v;
  };
  while (std::getline(ss, item, ',')) {
    auto dash = item.find('-');
    if (dash == std::string::npos) {
      out.push_back(number(item));
    } else {
      int64_t a = number(item.substr(0, dash)), b = number(item.substr(dash + 1));
      MIMIC_CHECK(a <= b, "--layers '", spec, "': empty range ", item);
      for (int64_t i = a; i <= b; ++i) out.push_back(i);
    }
  }
  MIMIC_CHECK(!out.empty(), "--layers '", spec, "' names no layer");
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace mimic
