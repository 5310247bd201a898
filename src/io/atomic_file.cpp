#include "mimic/io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "mimic/core/error.h"

namespace mimic::io {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  fs::path target(path);
  if (target.has_parent_path() && !fs::exists(target.parent_path())) fs::create_directories(target.parent_path());
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    MIMIC_CHECK(os.good(), "cannot write ", tmp, ": ", std::strerror(errno));
    try {
      write(os);
    } catch (...) {
      os.close();
      std::remove(tmp.c_str());
      throw;
    }
    os.flush();
    bool ok = os.good();
    os.close();
    if (!ok) {
      std::remove(tmp.c_str());
      fail("error while writing ", path, " (disk full?)");
    }
  }
  int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    std::remove(tmp.c_str());
    fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
  }
}

void write_text_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& os) { os << text; });
}

std::string read_text_file(const std::string& path) {
  std::ifstream is(path, std::ios::binary);
  MIMIC_CHECK(is.good(), "cannot read ", path, ": ", std::strerror(errno));
  std::ostringstream ss;
  ss << is.rdbuf();
  return ss.str();
}

}  // namespace mimic::io
