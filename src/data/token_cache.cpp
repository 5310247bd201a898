#include "mimic/data/token_cache.h"

#include <cstdio>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "mimic/core/error.h"
#include "mimic/core/json_keys.h"
#include "mimic/core/paths.h"
#include "mimic/io/atomic_file.h"
#include "mimic/text/tokenizer.h"

namespace mimic::data {

struct TokenCache::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr && addr != MAP_FAILED && size) munmap(addr, size);
  }
};

TokenCacheInfo write_token_cache(const std::string& path, const text::Tokenizer& tok, const std::vector<Document>& docs) {
  MIMIC_CHECK(tok.vocab_size() <= (int64_t{1} << 32), "token caches store at most 32-bit ids; vocabulary of ", tok.vocab_size(), " is too large");
  const bool wide = tok.vocab_size() > 65536;
  TokenCacheInfo info;
  info.tokenizer = tok.identity();
  info.vocab_size = tok.vocab_size();
  info.separator = tok.eos_id() >= 0 ? tok.eos_id() : tok.sep_id();
  MIMIC_CHECK(info.separator >= 0, "tokenizer ", tok.kind(), " has no end-of-text token to separate documents with: name it (eos_token in the "
              "model's tokenizer_config.json, or its special_tokens_map.json)");
  info.document_start = tok.document_start();
  std::vector<uint32_t> ids;
  std::vector<int64_t> offsets;
  nlohmann::json doc_ids = nlohmann::json::array();
  for (const auto& d : docs) {
    offsets.push_back(static_cast<int64_t>(ids.size()));
    for (auto id : tok.encode_document(d.text)) ids.push_back(static_cast<uint32_t>(id));
    ids.push_back(static_cast<uint32_t>(info.separator));
    doc_ids.push_back(d.id);
  }
  offsets.push_back(static_cast<int64_t>(ids.size()));
  info.documents = static_cast<int64_t>(docs.size());
  info.tokens = static_cast<int64_t>(ids.size());
  io::write_file_atomically(path, [&](std::ostream& os) {
    if (wide) {
      os.write(reinterpret_cast<const char*>(ids.data()), static_cast<std::streamsize>(ids.size() * sizeof(uint32_t)));
      return;
    }
    const std::vector<uint16_t> narrow(ids.begin(), ids.end());
    os.write(reinterpret_cast<const char*>(narrow.data()), static_cast<std::streamsize>(narrow.size() * sizeof(uint16_t)));
  });
  nlohmann::json meta = {{"format", "mimic-token-cache-1"}, {"dtype", wide ? "uint32" : "uint16"}, {"tokenizer", info.tokenizer},
                         {"vocab_size", info.vocab_size},   {"separator", info.separator}, {"documents", info.documents},
                         {"tokens", info.tokens},           {"document_ids", doc_ids},   {"document_offsets", offsets}};
  // the key is written only where there is a start: a cache of GPT-2 or BERT stays byte for byte what it was
  if (!info.document_start.empty()) meta["document_start"] = info.document_start;
  io::write_text_atomically(path + ".json", meta.dump(1));
  return info;
}

TokenCache TokenCache::open(const std::string& path) {
  TokenCache c;
  const std::string index = path + ".json";
  const auto meta = json_parse(io::read_text_file(index), index);
  c.info_.tokenizer = json_string(meta, "tokenizer", index);
  const std::string dtype = json_string_or(meta, "dtype", index, "uint16");
  MIMIC_CHECK(dtype == "uint16" || dtype == "uint32", index, ": dtype must be uint16 or uint32, got '", dtype, "'");
  c.wide_ = dtype == "uint32";
  const size_t width = c.wide_ ? 4 : 2;
  c.info_.vocab_size = json_int(meta, "vocab_size", index);
  c.info_.separator = json_int(meta, "separator", index, 0);
  c.info_.documents = json_int(meta, "documents", index, 0);
  c.info_.tokens = json_int(meta, "tokens", index, 0);
  if (meta.contains("document_start")) {  // absent: none (every cache written before the key)
    const auto& start = meta["document_start"];
    MIMIC_CHECK(start.is_array(), index, ": key 'document_start' must be a list of token ids");
    for (const auto& x : start) {
      MIMIC_CHECK(x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() < c.info_.vocab_size, index,
                  ": key 'document_start' must be a list of token ids below ", c.info_.vocab_size, ", holds ", x.dump());
      c.info_.document_start.push_back(x.get<int64_t>());
    }
  }
  const auto& offsets = json_key(meta, "document_offsets", index);
  MIMIC_CHECK(offsets.is_array(), index, ": key 'document_offsets' must be a list of integers");
  for (const auto& x : offsets) {
    MIMIC_CHECK(x.is_number_integer(), index, ": key 'document_offsets' must be a list of integers, holds ", x.dump());
    c.offsets_.push_back(x.get<int64_t>());
  }
  int fd = io::open_regular_file(path);
  struct stat st {};
  fstat(fd, &st);
  size_t bytes = static_cast<size_t>(st.st_size);
  if (bytes != static_cast<size_t>(c.info_.tokens) * width) {
    ::close(fd);
    fail("token cache ", path, " has ", bytes, " bytes, its index says ", c.info_.tokens, " tokens (delete it to rebuild)");
  }
  c.map_ = std::make_shared<Mapping>();
  if (bytes > 0) {
    c.map_->addr = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    c.map_->size = bytes;
  }
  ::close(fd);
  MIMIC_CHECK(c.map_->addr != MAP_FAILED, "mmap of ", path, " failed");
  c.data_ = c.map_->addr;
  MIMIC_CHECK(static_cast<int64_t>(c.offsets_.size()) == c.info_.documents + 1 && c.offsets_.back() == c.info_.tokens,
              "token cache ", path, ": document offsets inconsistent");
  return c;
}

namespace {
// The cache at `path` if it is there and was written as `tok` writes one now: a cache from before document starts
// (no start where the tokenizer has one, e.g. a Llama's <s>) is not reused. The index is compared before the ids are
// opened: another process rewriting the cache renames the new ids into place before the new index, and the old
// index beside the new ids is a cache to write again, not one to refuse for its size (the review of 2026-12-01).
std::optional<TokenCache> open_if_current(const std::string& path, const text::Tokenizer& tok) {
  if (!std::filesystem::exists(path) || !std::filesystem::exists(path + ".json")) return std::nullopt;
  const auto index = json_parse(io::read_text_file(path + ".json"), path + ".json");
  const auto start = tok.document_start();
  if (index.is_object() && (index.contains("document_start") ? index["document_start"] != nlohmann::json(start) : !start.empty()))
    return std::nullopt;
  return TokenCache::open(path);
}
}  // namespace

TokenCache corpus_token_cache(const std::string& corpus, Split split, const text::Tokenizer& tok) {
  std::string dir = cache_dir() + "/data/" + tok.identity();
  std::vector<Document> docs;
  std::string path;
  if (is_text_data(corpus)) {
    // A user's text: read every time (it may have changed), cached under a digest of its content, so that an edited
    // file is tokenized again and two files with the same text share one cache.
    uint64_t h = 1469598103934665603ull;  // FNV-1a 64 over the ids and texts of all parts
    for (auto& d : load_text_data(corpus)) {
      for (const std::string* piece : {&d.id, &d.text}) {
        for (unsigned char c : *piece) {
          h ^= c;
          h *= 1099511628211ull;
        }
        h ^= 0xff;
        h *= 1099511628211ull;
      }
      if (split_of(d) == split) docs.push_back(std::move(d));
    }
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(h));
    path = dir + "/text-" + digest + "." + split_name(split) + ".bin";
  } else {
    std::vector<std::string> names = corpus == "all" ? lm_corpus_names() : std::vector<std::string>{corpus};
    path = dir + "/" + corpus + "." + split_name(split) + ".bin";
    if (auto cached = open_if_current(path, tok)) return std::move(*cached);
    for (const auto& n : names)
      for (auto& d : load_corpus(n))
        if (split_of(d) == split) docs.push_back(std::move(d));
  }
  if (auto cached = open_if_current(path, tok)) return std::move(*cached);
  MIMIC_CHECK(!docs.empty(), "corpus '", corpus, "' has no documents in split ", split_name(split));
  std::filesystem::create_directories(dir);
  write_token_cache(path, tok, docs);
  return TokenCache::open(path);
}

}  // namespace mimic::data
