#include "mimic/io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "mimic/core/error.h"
#include "mimic/core/hash.h"

namespace mimic::io {

namespace fs = std::filesystem;

namespace {

const char* kTmpInfix = ".tmp.";

struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// The pid a temporary's name carries (NAME.tmp.PID), or 0 when the name is no temporary of ours.
pid_t temporary_pid(const std::string& name) {
  const auto at = name.rfind(kTmpInfix);
  if (at == std::string::npos || at == 0) return 0;
  const std::string digits = name.substr(at + std::strlen(kTmpInfix));
  if (digits.empty() || digits.size() > 9) return 0;
  for (char c : digits)
    if (!std::isdigit(static_cast<unsigned char>(c))) return 0;
  return static_cast<pid_t>(std::stol(digits));
}

// EPERM: the process exists but belongs to someone else, so it still runs.
bool process_runs(pid_t pid) { return pid == ::getpid() || ::kill(pid, 0) == 0 || errno == EPERM; }

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a named pipe (FIFO)";
  if (S_ISCHR(m) || S_ISBLK(m)) return "a device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

void fsync_folder(const fs::path& file) {
  const std::string dir = file.has_parent_path() ? file.parent_path().string() : ".";
  Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  // Some file systems refuse fsync on a folder (EINVAL); the rename has happened either way.
  if (d.fd >= 0) ::fsync(d.fd);
}

}  // namespace

std::string temporary_path(const std::string& path) {
  // Every output replaces its file by a rename: over a device, a FIFO or a socket that would put a regular file in
  // its place (`--out /dev/null` replaced the machine's /dev/null) — refused, as a directory is. A symbolic link to
  // a regular file is replaced by the new file; the file it pointed to is left as it was.
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail(path, " is ", file_kind(st.st_mode), ", not a regular file; give a regular file");
  const fs::path target(path);
  const std::string stem = target.filename().string() + kTmpInfix;
  std::error_code ec;
  for (fs::directory_iterator it(target.has_parent_path() ? target.parent_path() : fs::path("."), ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.compare(0, stem.size(), stem) != 0 || name.rfind(kTmpInfix) + std::strlen(kTmpInfix) != stem.size()) continue;
    const pid_t pid = temporary_pid(name);
    std::error_code rm;
    if (pid > 0 && !process_runs(pid)) fs::remove(it->path(), rm);
  }
  return path + kTmpInfix + std::to_string(::getpid());
}

int remove_stale_temporaries(const std::string& dir) {
  std::vector<fs::path> stale;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec)) continue;
    const pid_t pid = temporary_pid(it->path().filename().string());
    if (pid > 0 && !process_runs(pid)) stale.push_back(it->path());
  }
  int removed = 0;
  for (const auto& p : stale) removed += fs::remove(p, ec) ? 1 : 0;
  return removed;
}

void fail_writing(const std::string& path, int err) {
  // errno as a stream left it may come from a call after the failing write: only a write's own causes are trusted
  if (err != ENOSPC && err != EDQUOT && err != EFBIG && err != EIO && err != EROFS && err != EBADF) err = 0;
  if (err == 0 || err == EIO) {
    // a stream reports only that it failed: a folder with no space left names the cause the system would have
    const fs::path target(path);
    struct statvfs v {};
    if (::statvfs((target.has_parent_path() ? target.parent_path() : fs::path(".")).c_str(), &v) == 0 && v.f_bavail == 0) err = ENOSPC;
  }
  if (err == 0) fail("error while writing ", path, ": the write failed (no reason given by the system)");
  fail("error while writing ", path, ": ", std::strerror(err));
}

void commit_temporary(const std::string& tmp, const std::string& path) {
  {
    Fd f{::open(tmp.c_str(), O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0 || ::fsync(f.fd) != 0) {
      const int err = errno;
      std::remove(tmp.c_str());
      fail_writing(path, err);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    fail("cannot rename ", tmp, " to ", path, ": ", std::strerror(err));
  }
  fsync_folder(fs::path(path));
}

void move_file_durably(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) fail("cannot move ", from, " to ", to, ": ", std::strerror(errno));
  fsync_folder(fs::path(to));
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  fs::path target(path);
  if (target.has_parent_path() && !fs::exists(target.parent_path())) fs::create_directories(target.parent_path());
  const std::string tmp = temporary_path(path);
  {
    std::ofstream os(tmp, std::ios::binary | std::ios::trunc);
    MIMIC_CHECK(os.good(), "cannot write ", tmp, ": ", std::strerror(errno));
    errno = 0;  // what the stream's failing write(2) leaves here is the cause (fail_writing)
    try {
      write(os);
    } catch (...) {
      os.close();
      std::remove(tmp.c_str());
      throw;
    }
    os.flush();
    const bool ok = os.good();
    const int err = errno;
    os.close();
    if (!ok) {
      std::remove(tmp.c_str());
      fail_writing(path, err);
    }
  }
  commit_temporary(tmp, path);
}

void write_text_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, [&](std::ostream& os) { os << text; });
}

void copy_file_atomically(const std::string& from, const std::string& to) {
  Fd in{open_regular_file(from)};
  write_file_atomically(to, [&](std::ostream& os) {
    std::vector<char> buf(1 << 20);
    for (;;) {
      const ssize_t n = ::read(in.fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      MIMIC_CHECK(n >= 0, "cannot read ", from, ": ", std::strerror(errno));
      if (n == 0) break;
      os.write(buf.data(), n);
    }
  });
}

int open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading waits for a writer; with it the open returns and fstat refuses it.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  MIMIC_CHECK(fd >= 0, "cannot open ", path, ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const mode_t mode = st.st_mode;
    ::close(fd);
    fail(path, " is ", file_kind(mode), ", not a regular file; give a regular file");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return fd;
}

void require_regular_file(const std::string& path) { Fd f{open_regular_file(path)}; }

std::string read_text_file(const std::string& path) {
  Fd in{open_regular_file(path)};
  std::string out;
  std::vector<char> buf(1 << 16);
  for (;;) {
    const ssize_t n = ::read(in.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    MIMIC_CHECK(n >= 0, "cannot read ", path, ": ", std::strerror(errno));
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

std::string file_digest(const std::string& path) {
  Fd in{open_regular_file(path)};
  Hasher h;
  std::vector<char> buf(1 << 20);
  // Hasher takes 8-byte words: every chunk but the last is filled whole, so that the digest does not depend on
  // how the reads were split.
  for (bool eof = false; !eof;) {
    size_t got = 0;
    while (got < buf.size()) {
      const ssize_t n = ::read(in.fd, buf.data() + got, buf.size() - got);
      if (n < 0 && errno == EINTR) continue;
      MIMIC_CHECK(n >= 0, "cannot read ", path, ": ", std::strerror(errno));
      if (n == 0) {
        eof = true;
        break;
      }
      got += static_cast<size_t>(n);
    }
    h.bytes(buf.data(), got);
  }
  return h.hex();
}

}  // namespace mimic::io
