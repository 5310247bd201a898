// Writing files so that a reader (or a resumed run) never sees a half-written one: the content goes to a
// temporary file in the same folder, is flushed and fsync'ed, then renamed over the target.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace mimic::io {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_text_atomically(const std::string& path, const std::string& text);
std::string read_text_file(const std::string& path);  // throws mimic::Error naming the file

}  // namespace mimic::io
