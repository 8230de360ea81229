// Files and folders replaced whole: a reader (or a crash, a kill, a full disk) sees the
// old content or the new one, never a part or a mixture. Every write, flush, fsync,
// close and rename is checked; a failure throws msa::Error naming the path and the
// reason, and leaves the old content in place.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

#include "hal/export.h"

namespace msa::hal {

// One file written in place of `path`. A regular file (or a new one) is written to a
// temporary file in the same folder, then flushed, fsynced, closed and renamed over
// `path` (a symlink is followed: its target is replaced). A path that exists and is
// not a regular file (/dev/stdout, /dev/full, a pipe) is written directly, every write
// and the close still checked. Destroying an AtomicFile that was not committed removes
// its temporary file.
class MSA_API AtomicFile {
 public:
  // `label` (e.g. "argument '--json'") starts every message: "<label>: cannot write
  // '<path>': <reason>".
  explicit AtomicFile(const std::string& path, const std::string& label = "");
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(std::string_view s) { write(s.data(), s.size()); }
  // Makes the new content the file's: flush, fsync, close, rename, fsync of the folder.
  void commit();

 private:
  // Closes and removes the temporary file, then throws the message for `what`.
  [[noreturn]] void fail(const std::string& what);
  std::string path_, label_;  // as given (for messages)
  std::string target_;        // the file replaced (symlinks resolved)
  std::string temp_;          // "" when writing directly
  int fd_ = -1;
};

// Writes `bytes` as the whole content of `path` through AtomicFile.
MSA_API void write_file_atomic(const std::string& path, std::string_view bytes, const std::string& label = "");

// A temporary folder beside `target` (same file system) for building its replacement.
MSA_API std::string make_temp_dir_beside(const std::string& target);

// Makes the folder `staged` (from make_temp_dir_beside) take the place of `target`: the
// swap is one rename (an exchange when `target` exists), then the old folder is removed.
// Every file in `staged` must already be synced (AtomicFile does that).
MSA_API void replace_dir(const std::string& staged, const std::string& target);

}  // namespace msa::hal
