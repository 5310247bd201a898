// A model folder's tokenizer as HF's AutoTokenizer would build it: text::load_tokenizer with the class AutoTokenizer
// takes where the folder's tokenizer_config.json names none — config.json's tokenizer_class, else the class the model
// family registry gives its model_type (a Llama or Mistral folder's LlamaTokenizerFast, which opens a text with <s>
// whatever its tokenizer.json says). The stages load tokenizers through this.
#pragma once
#include <memory>
#include <string>

#include "mimic/text/tokenizer.h"

namespace mimic::models {

std::unique_ptr<text::Tokenizer> load_tokenizer(const std::string& dir);

}  // namespace mimic::models
