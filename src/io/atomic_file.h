// Writing files so that a reader (or a resumed run) never sees a half-written one: the content goes to a
// temporary file in the same folder, is flushed and fsync'ed, then renamed over the target, and the folder is
// fsync'ed so that the rename itself survives a crash. The temporary is NAME.tmp.PID: a later run can tell the
// leftovers of a writer that died (removed) from those of one still running (kept).
// Reading: every reader opens its files through open_regular_file, so a FIFO, a device or a directory given
// as input is refused at once (a FIFO used to block the open forever, a directory read as empty).
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace mimic::io {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);
void write_text_atomically(const std::string& path, const std::string& text);
// The bytes of `from` (a regular file) under the name `to`, atomically.
void copy_file_atomically(const std::string& from, const std::string& to);
// A complete file moved under another name in the same file system (one rename, so `to` is the old file or the
// new one), the target's folder fsync'ed so that the move survives a crash. `from` is left in place on failure.
void move_file_durably(const std::string& from, const std::string& to);

// For writers that must create the file themselves (HDF5): write to temporary_path(path), then
// commit_temporary. temporary_path first removes the dead writers' temporaries of the same file.
std::string temporary_path(const std::string& path);
void commit_temporary(const std::string& tmp, const std::string& path);  // fsync, rename, fsync the folder

// A failed write of `path`, as one line with the system's words for `err` (errno where the failure happened;
// 0 when a stream lost it: then a full file system is read from the folder itself).
[[noreturn]] void fail_writing(const std::string& path, int err);

// Removes every NAME.tmp.PID under `dir` (recursively) whose process no longer runs; returns how many.
int remove_stale_temporaries(const std::string& dir);

// Opens `path` read-only and returns the descriptor (the caller closes it); anything but a regular file
// (after symlinks) is a mimic::Error naming the file, raised without blocking.
int open_regular_file(const std::string& path);
void require_regular_file(const std::string& path);  // the same check, for libraries that open by name (HDF5)
std::string read_text_file(const std::string& path);  // throws mimic::Error naming the file
// A digest of a regular file's bytes (core/hash.h's Hasher, as hex): what tells a file from one changed since.
std::string file_digest(const std::string& path);

}  // namespace mimic::io
