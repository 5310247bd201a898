#include "mimic/io/output_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

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

namespace {
// Whether this process holds the directory open as `fd` (lock_output_dir's registry, keyed by identity).
bool held_here(int fd) {
  struct stat st {};
  ::fstat(fd, &st);
  std::lock_guard<std::mutex> g(registry_mutex);
  auto it = registry().find(Key{st.st_dev, st.st_ino});
  return it != registry().end() && !it->second.expired();
}

// Refuses `path` when a folder above it is held by another process (lock_output_dir's exclusive hold: a training run
// writing there). Each ancestor is tried with a shared lock, let go at once; the first one this process holds ends
// the walk (a run exporting best/ below the folder it holds). A forward into RUN/best/ or an export into RUN/last
// while RUN trained succeeded, and the run then died or deleted the export (the fourth probe of 2026-11-27).
// Whether the folder open as `fd` is held by another process (an exclusive hold): tried with a shared lock, let go
// at once; false for one this process holds.
bool held_elsewhere(int fd) {
  if (held_here(fd)) return false;
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  if (!held) ::flock(fd, LOCK_UN);
  return held;
}

void refuse_inside_a_held_folder(const std::filesystem::path& path, const std::string& what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec) return;
  for (p = p.parent_path(); !p.empty(); p = p.parent_path()) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      const bool mine = held_here(fd);
      const bool other = !mine && held_elsewhere(fd);
      ::close(fd);
      if (mine) return;
      if (other)
        fail(what, " lies inside ", p.string(), ", the output folder another running mimic command is writing; wait for it to finish or "
             "choose another --out");
    }
    if (p == p.root_path()) break;
  }
}
}  // namespace

namespace {
// The folders lock_output_dir created, for a SIGINT or SIGTERM that ends the process before the lock is let go: a
// probe interrupted, a convert killed by a job's time limit, left an empty --out behind (helper-59's probe of
// 2026-12-04), as no destructor runs then. The handler removes those still empty (rmdir removes no other, and is
// safe in a handler), then ends the process by the same signal. The lock files of lock_output_file go first, as the
// holder's destructor removes them, still held (a `.OUT.lock` stayed beside every output of a command ended by a
// signal: helper-65's probe of 2026-12-05). Fixed slots, as a handler may not allocate: a path is written while its
// slot is not live, and the handler reads only live slots.
constexpr int kSlots = 32;
struct CreatedSlot {
  char path[PATH_MAX];
  std::atomic<int> live{0};  // 1: a folder lock_output_dir created; 2: a lock file, held
};
CreatedSlot created_slots[kSlots];
constexpr int kFolderSlot = 1, kLockFileSlot = 2;

extern "C" void remove_created_and_end(int sig) {
  for (auto& slot : created_slots)
    if (slot.live.load() == kLockFileSlot && ::unlink(slot.path) == 0) slot.live.store(0);
  // deepest first within one lock; a later lock's folder may lie inside an earlier one's: passes until none goes
  for (int pass = 0; pass < kSlots; ++pass) {
    bool removed = false;
    for (auto& slot : created_slots)
      if (slot.live.load() == kFolderSlot && ::rmdir(slot.path) == 0) {
        slot.live.store(0);
        removed = true;
      }
    if (!removed) break;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

// Installed for SIGINT and SIGTERM where the process left them at their default: an ignored signal stays ignored (a
// run a script started with `&`) and a handler of the program's own stays. The trainer's stop-after-this-step handler replaces
// this one while a run trains (it has written into --out by then) and puts it back.
void remove_created_on_signal() {
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction now {}, before {};
    if (::sigaction(sig, nullptr, &before) != 0 || (before.sa_flags & SA_SIGINFO) || before.sa_handler != SIG_DFL) continue;
    now.sa_handler = remove_created_and_end;
    sigemptyset(&now.sa_mask);
    ::sigaction(sig, &now, nullptr);
  }
}

// The slot that holds `path` as `kind` (-1 where none was free or the path too long: it is left to the lock alone).
int register_path(const std::string& path, int kind) {
  if (path.size() >= PATH_MAX) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int free = 0;  // taken as -1 (which the handler skips) while the path is written: two threads take two slots
    if (created_slots[i].live.compare_exchange_strong(free, -1)) {
      std::memcpy(created_slots[i].path, path.c_str(), path.size() + 1);
      created_slots[i].live.store(kind);
      return i;
    }
  }
  return -1;
}

// The slots that hold `created` (register_path's).
std::vector<int> register_created(const std::vector<std::filesystem::path>& created) {
  std::vector<int> slots;
  if (created.empty()) return slots;
  remove_created_on_signal();
  for (const auto& p : created) slots.push_back(register_path(p.native(), kFolderSlot));
  return slots;
}

// The folders missing from `dir` up to the first that exists, deepest first: those creating `dir` will create.
std::vector<std::filesystem::path> missing_folders(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> missing;
  fs::path p = fs::absolute(dir, ec).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();  // "out/"
  for (; !ec && !p.empty() && !fs::exists(p, ec) && p != p.root_path(); p = p.parent_path()) missing.push_back(p);
  return missing;
}

int register_lock_file(const std::string& path) {
  remove_created_on_signal();
  return register_path(path, kLockFileSlot);
}
}  // namespace

struct OutputLock::Held {
  Key key;
  int fd = -1;
  std::string lock_file;  // lock_output_file's: removed while still held, so no one locks a file about to vanish
  int dir_fd = -1;        // lock_output_file's shared hold on the folder the file is in (-1: none)
  std::vector<std::filesystem::path> created;  // the folders lock_output_dir or lock_output_file created, deepest first
  std::vector<int> slots;                      // where a signal's handler finds them (register_created)
  int lock_file_slot = -1;                     // where it finds lock_file (register_lock_file)
  ~Held() {
    std::lock_guard<std::mutex> g(registry_mutex);
    for (int i : slots)
      if (i >= 0) created_slots[i].live.store(0);
    if (lock_file_slot >= 0) created_slots[lock_file_slot].live.store(0);
    auto it = registry().find(key);
    if (it != registry().end() && it->second.expired()) registry().erase(it);
    if (!lock_file.empty()) ::unlink(lock_file.c_str());
    // A file's folder goes only while no other command holds it too (its shared hold), as that one is about to
    // write there.
    const bool alone = created.empty() || dir_fd < 0 || ::flock(dir_fd, LOCK_EX | LOCK_NB) == 0;
    for (const auto& p : created)  // those still empty (rmdir removes no other): a run that wrote nothing leaves none
      if (!alone || ::rmdir(p.c_str()) != 0) break;
    ::close(fd);  // drops the flock
    if (dir_fd >= 0) ::close(dir_fd);
  }
};

OutputLock lock_output_file(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  // The lock file sits beside the file a name leads to, through symlinks: two commands writing one file by two
  // spellings of its path take one lock (a record resumed through a symlink to a file another record was writing
  // called it "damaged" instead of naming the writer, the probe of 2026-11-27).
  fs::path p = fs::weakly_canonical(fs::absolute(path), ec);
  if (ec || p.filename().empty()) p = fs::path(path);
  const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
  refuse_inside_a_held_folder(dir, path);
  // The folders created for the file go again with its lock, if still empty: `record --out new/x.h5` interrupted, or
  // failing before it wrote, left an empty new/ (helper-66's review of 2026-12-05).
  auto created = missing_folders(dir);
  fs::create_directories(dir, ec);
  // A shared hold on the folder: files of one folder lock apart, but not while another process holds the whole
  // folder (lock_output_dir's exclusive hold: a training run writing there). `forward --out RUN/model.safetensors`
  // beside a running finetune into RUN succeeded, as did the finetune, the file holding the finetune's weights
  // (the probe of 2026-11-27). A folder this process holds already needs no second hold.
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    const bool mine = held_here(dir_fd);
    if (mine) {
      ::close(dir_fd);
      dir_fd = -1;
    } else if (::flock(dir_fd, LOCK_SH | LOCK_NB) != 0) {
      const int err = errno;
      ::close(dir_fd);
      dir_fd = -1;
      if (err == EWOULDBLOCK)
        fail(path, " lies in ", dir.string(), ", the output folder another running mimic command is writing; wait for it to finish or choose another --out");
    }
  }
  struct DirHold {  // let go unless handed to the lock
    int& fd;
    ~DirHold() {
      if (fd >= 0) ::close(fd);
    }
  } dir_hold{dir_fd};
  const std::string lock_file = (dir / ("." + p.filename().string() + ".lock")).string();
  // A holder removes the lock file before it lets go: whoever opened the old file then holds a lock on a name that
  // no longer exists, sees it (the inode under the name differs, or there is none) and tries again.
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(lock_file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    // said as the output it is: the hidden lock file's name alone read as another file's trouble (helper-91's probe)
    MIMIC_CHECK(fd >= 0, "cannot write ", path, ": ", std::strerror(errno), " (creating its lock file ", lock_file, ")");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        fail(path, " is being written by another running mimic command (", lock_file, " is locked); wait for it to finish or choose another --out");
      fail("cannot lock ", lock_file, ": ", std::strerror(err));
    }
    struct stat held {}, named {};
    ::fstat(fd, &held);
    if (::stat(lock_file.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
      OutputLock lock;
      lock.held_ = std::make_shared<OutputLock::Held>();
      lock.held_->fd = fd;
      lock.held_->lock_file = lock_file;
      lock.held_->lock_file_slot = register_lock_file(lock_file);
      lock.held_->slots = register_created(created);
      lock.held_->created = std::move(created);
      lock.held_->dir_fd = std::exchange(dir_fd, -1);
      return lock;
    }
    ::close(fd);
  }
  fail("cannot lock ", path, ": its lock file ", lock_file, " keeps changing");
}

bool held_by_another(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool other = held_elsewhere(fd);
  ::close(fd);
  return other;
}

OutputLock lock_output_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  refuse_inside_a_held_folder(dir, dir);
  // The folders created here (the output folder, and those missing above it) go again when the lock is let go, if
  // still empty: a run that failed before writing anything (a rendezvous that failed, ranks that disagreed) left an
  // empty --out behind (issue 38). A folder that was there before is never removed.
  // A holder that created the folder removes it (if empty) before it lets go: whoever opened the folder meanwhile
  // then holds a lock on a folder no longer under that name, sees it (another inode or none) and tries again — and
  // then created it itself, so what is missing is taken anew at each try.
  for (int attempt = 0;; ++attempt) {
    MIMIC_CHECK(attempt < 100, "cannot lock the output directory ", dir, ": it keeps being removed and created");
    std::vector<fs::path> created = missing_folders(dir);
    // a link to nothing: create_directories said "File exists" (the tenth probe of 2026-11-29)
    if (fs::is_symlink(fs::symlink_status(dir, ec)) && !fs::exists(dir, ec))
      fail("cannot create the output directory ", dir, ": it is a link to ", fs::read_symlink(dir, ec).string(),
           ", which does not exist (create the folder it names, or give another --out)");
    ec.clear();
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
      struct stat named {};
      if (::stat(dir.c_str(), &named) != 0 || named.st_dev != st.st_dev || named.st_ino != st.st_ino) {
        ::close(fd);  // the folder went (or was replaced) between open and flock
        continue;
      }
      lock.held_ = std::make_shared<OutputLock::Held>();
      lock.held_->key = key;
      lock.held_->fd = fd;
      lock.held_->slots = register_created(created);
      lock.held_->created = std::move(created);
      registry()[key] = lock.held_;
    }
    // and again now that it is held: a training run that took the folder above after the first look, and looked below
    // before this hold, saw nothing — both then wrote, and the run replaced this export (the fourteenth probe of
    // 2026-11-30). One of the two now always sees the other (each holds, then looks).
    refuse_inside_a_held_folder(dir, dir);
    remove_stale_temporaries(dir);
    return lock;
  }
}

}  // namespace mimic::io
