// A model folder's tokenizer as HF's AutoTokenizer would build it: text::load_tokenizer with the class AutoTokenizer
// takes where the folder's tokenizer_config.json names none — config.json's tokenizer_class, else the class the model
// family registry gives its model_type (a Llama or Mistral folder's LlamaTokenizerFast, which opens a text with <s>
// whatever its tokenizer.json says). The stages load tokenizers through this.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "mimic/text/tokenizer.h"

namespace mimic::models {

std::unique_ptr<text::Tokenizer> load_tokenizer(const std::string& dir);
// load_tokenizer, or nullptr with why not in `why` (load_tokenizer's error): for commands that describe or carry a
// folder without needing its tokenizer (info shows it, export says that the copy has none either).
std::unique_ptr<text::Tokenizer> try_load_tokenizer(const std::string& dir, std::string& why);

// The ids generation stops at, as HF's generate stops: every eos_token_id of the folder's generation_config.json (an id
// or a list: Llama 3.1's three), else of its config.json, and the tokenizer's end of text beside them (what mimic
// stopped at alone before it read either). Ids must be tokens of the model (vocab_size); a malformed file is refused
// naming it.
std::vector<int64_t> end_of_text_ids(const std::string& dir, const text::Tokenizer& tok, int64_t vocab_size);

}  // namespace mimic::models
