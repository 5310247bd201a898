// A run's hold on the output directory it writes: an exclusive flock(2) on the directory itself, taken
// before the run writes anything there and kept until the last OutputLock of the process lets go. A second
// process asking for a locked directory gets a mimic::Error naming it at once; the kernel drops the lock when
// its holder dies, so a killed run leaves no lock behind (the same mechanism HDF5 uses on a record file,
// which is why `record` needs none of this). Taking a directory also removes the temporaries that dead
// writers left in it (io::remove_stale_temporaries). Within one process the lock is shared: a stage that
// holds its --out can call the training engine or Model::save, which ask for the same directory again.
#pragma once
#include <memory>
#include <string>

namespace mimic::io {

class OutputLock {
 public:
  OutputLock() = default;
  bool held() const { return held_ != nullptr; }
  void release() { held_.reset(); }
  struct Held;

 private:
  friend OutputLock lock_output_dir(const std::string& dir);
  friend OutputLock lock_output_file(const std::string& path);
  std::shared_ptr<Held> held_;
};

// Creates `dir` if needed, locks it for this process, then sweeps its stale temporaries. The folders it created are
// removed when the lock is let go if they are still empty (a run that failed before writing leaves no empty --out).
OutputLock lock_output_dir(const std::string& dir);

// Whether another process holds `dir` (lock_output_dir's exclusive hold) now; false for a folder this process holds,
// or one that does not exist. A run that holds a folder asks this of the folders below it it is about to write.
bool held_by_another(const std::string& dir);

// The same hold on one output file (a record), for the writer's whole run, --fresh included: an exclusive flock on
// a lock file beside it, `.NAME.lock`, removed when the lock is let go. A second writer of the same file gets a
// mimic::Error naming it at once (two records writing one file both reported success, and the file held the
// second's samples). Files in one folder lock apart.
OutputLock lock_output_file(const std::string& path);

}  // namespace mimic::io
