// Layer lists as the stages take them (--layers of record, convert, distill, report): "all" or "0,2,4-5".
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace mimic {

// "all" (or "") → 0..n_layer-1; otherwise a comma-separated list of layers and ranges a-b (blanks ignored), sorted,
// deduplicated; an out-of-range or malformed entry is a mimic::Error naming --layers.
std::vector<int64_t> parse_layers(const std::string& spec, int64_t n_layer);

}  // namespace mimic
