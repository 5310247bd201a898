#include "mimic/io/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>

#include "mimic/core/error.h"
#include "mimic/io/atomic_file.h"

namespace mimic::io {

namespace {
using Key = std::pair<dev_t, ino_t>;  // a directory by identity: two spellings of one path share the lock
std::mutex registry_mutex;
std::map<Key, std::weak_ptr<OutputLock::Held>>& registry() {
  static std::map<Key, std::weak_ptr<OutputLock::Held>> r;
  return r;
}
}  // namespace

struct OutputLock::Held {
  Key key;
  int fd = -1;
  ~Held() {
    std::lock_guard<std::mutex> g(registry_mutex);
    auto it = registry().find(key);
    if (it != registry().end() && it->second.expired()) registry().erase(it);
    ::close(fd);  // drops the flock
  }
};

OutputLock lock_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  MIMIC_CHECK(fs::is_directory(dir), "cannot create the output directory ", dir, ec ? ": " + ec.message() : std::string(" (a file has that name)"));
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  MIMIC_CHECK(fd >= 0, "cannot open the output directory ", dir, ": ", std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  const Key key{st.st_dev, st.st_ino};
  OutputLock lock;
  {
    std::lock_guard<std::mutex> g(registry_mutex);
    if (auto it = registry().find(key); it != registry().end())
      if ((lock.held_ = it->second.lock())) {
        ::close(fd);
        return lock;
      }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        fail(dir, " is locked by another running mimic command writing there; wait for it to finish or choose another --out");
      fail("cannot lock the output directory ", dir, ": ", std::strerror(err));
    }
    lock.held_ = std::make_shared<OutputLock::Held>();
    lock.held_->key = key;
    lock.held_->fd = fd;
    registry()[key] = lock.held_;
  }
  remove_stale_temporaries(dir);
  return lock;
}

}  // namespace mimic::io
