// Bytes that reach a one-line message or a JSON document: whether they are UTF-8, and how to show them when not.
// One place for both, so that every boundary (arguments, text files, JSON parse errors, HDF5 attributes) shows odd
// bytes alike.
#pragma once
#include <string>

namespace mimic {

// True when `s` is valid UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(const std::string& s);
// `s` printable in a one-line message: printable ASCII as is, every other byte (control characters, DEL, bytes
// beyond ASCII) as \xHH.
std::string shown_bytes(const std::string& s);
// A piece of a file (a line, a token) quoted in a one-line message: UTF-8 text without control characters as it is,
// anything else as shown_bytes gives it; longer than `most` bytes, its start and "… (N bytes)". A 50 MB line of a
// merges.txt was echoed whole, and its raw bytes and NULs went to the terminal (helper-61's probe of 2026-12-04).
std::string shown_excerpt(const std::string& s, size_t most = 80);
// A text file's content without the byte-order mark (EF BB BF) some editors put before UTF-8 text: not text, and it was
// tokenized as two tokens before a document's first word (the probe of 2026-12-01).
std::string without_byte_order_mark(std::string s);
// A text file's content as mimic reads every text file: without the byte-order mark, and with its line endings as \n
// (CRLF and a lone CR both): an editor's line ending is no part of the text, and its \r tokens made a file's perplexity
// 1,644 where the same text with \n gave 1,184 (helper-50's probe of 2026-12-04). Spaces and blank lines stay.
std::string text_with_newlines(const std::string& s);

}  // namespace mimic
