// Where mimic finds its fetched assets (tokenizer files, corpora): $MIMIC_CACHE/assets, default
// ~/.cache/mimic/assets, filled by tools/setup.sh.
#pragma once
#include <string>

namespace mimic {

std::string cache_dir();
// Absolute path of an asset, e.g. asset_path("gpt2/vocab.json"). Throws mimic::Error naming the file and
// the set-up command when it is missing.
std::string asset_path(const std::string& relative);

}  // namespace mimic
