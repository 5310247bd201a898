// Where mimic finds its fetched assets (tokenizer files, corpora): $MIMIC_CACHE/assets, default
// ~/.cache/mimic/assets, filled by tools/setup.sh.
#pragma once
#include <string>

namespace mimic {

std::string cache_dir();
// Absolute path of an asset, e.g. asset_path("gpt2/vocab.json"). Throws mimic::Error naming the file and
// the set-up command when it is missing.
std::string asset_path(const std::string& relative);

// The embedded models shipped in examples/models/: gpt2-mini, bert-mini, bert-mini-spam, bert-mini-sotu-era.
const char* const* embedded_model_names();  // null-terminated
bool is_embedded_model_name(const std::string& name);
// Their names as messages list them: "gpt2-mini, bert-mini, ...".
std::string embedded_model_list();
// The directory of an embedded model: $MIMIC_MODELS/<name> when set, else the installed copy
// (<prefix>/share/mimic/models), else the source tree's examples/models. Throws mimic::Error when none holds it.
std::string embedded_model_dir(const std::string& name);

// A path as a run's settings keep it: absolute, lexically normal, without a trailing separator — so that "../m", "m/"
// and "/tmp/m" name one input and a run resumes whichever the command line spells (the probe of 2026-12-01); whether
// the contents changed is the digests' business.
std::string path_identity(const std::string& path);

}  // namespace mimic
