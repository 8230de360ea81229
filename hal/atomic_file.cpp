#include "hal/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "hal/error.h"

namespace msa::hal {
namespace {

namespace fs = std::filesystem;

// ".<name>.tmp-<pid>-<n>-<random>": hidden, unique per process and call.
std::string temp_name(const fs::path& target) {
  static std::atomic<unsigned> counter{0};
  static const unsigned salt = std::random_device{}();
  return "." + target.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) +
         "-" + std::to_string(salt);
}

fs::path folder_of(const fs::path& p) { return p.has_parent_path() ? p.parent_path() : fs::path("."); }

// fsync of a folder, so that a rename inside it survives a crash. File systems that
// cannot sync a folder (EINVAL) are skipped; any other failure is reported.
int sync_folder(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
  ::close(fd);
  return rc;
}

std::string reason(int err) { return std::strerror(err); }

}  // namespace

AtomicFile::AtomicFile(const std::string& path, const std::string& label) : path_(path), label_(label) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists && !S_ISREG(st.st_mode)) {  // a device, pipe or terminal: written directly
    fd_ = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    if (fd_ < 0) fail("cannot open: " + reason(errno));
    return;
  }
  std::error_code ec;
  fs::path target(path);
  if (fs::is_symlink(target, ec)) {
    const fs::path resolved = fs::weakly_canonical(target, ec);
    if (!ec) target = resolved;
  }
  target_ = target.string();
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = (folder_of(target) / temp_name(target)).string();
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt > 100)) {
      const int err = errno;
      temp_.clear();
      fail("cannot create a temporary file in '" + folder_of(target).string() + "': " + reason(err));
    }
  }
  if (exists) (void)::fchmod(fd_, st.st_mode & 07777);  // the replaced file's permissions
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::fail(const std::string& what) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
  throw Error((label_.empty() ? "" : label_ + ": ") + "cannot write '" + path_ + "': " + what);
}

void AtomicFile::write(const void* data, size_t n) {
  if (fd_ < 0) fail("write after commit");
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write failed: " + reason(w < 0 ? errno : EIO));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("committed twice");
  if (!temp_.empty() && ::fsync(fd_) != 0) fail("fsync failed: " + reason(errno));
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) fail("close failed: " + reason(errno));
  if (temp_.empty()) return;
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("cannot rename the temporary file over it: " + reason(errno));
  temp_.clear();
  if (const int err = sync_folder(folder_of(target_))) fail("fsync of its folder failed: " + reason(err));
}

void write_file_atomic(const std::string& path, std::string_view bytes, const std::string& label) {
  AtomicFile f(path, label);
  f.write(bytes);
  f.commit();
}

std::string make_temp_dir_beside(const std::string& target) {
  const fs::path t = fs::path(target).lexically_normal();
  const fs::path base = t.has_filename() ? t : t.parent_path();
  for (int attempt = 0;; ++attempt) {
    const fs::path dir = folder_of(base) / temp_name(base);
    if (::mkdir(dir.c_str(), 0777) == 0) return dir.string();
    if (errno != EEXIST || attempt > 100)
      throw Error("cannot create a temporary folder beside '" + target + "': " + reason(errno));
  }
}

void replace_dir(const std::string& staged, const std::string& target) {
  const fs::path t = fs::path(target).lexically_normal();
  const fs::path base = t.has_filename() ? t : t.parent_path();
  auto fail = [&](const std::string& what, int err) {
    throw Error("cannot replace the folder '" + target + "': " + what + ": " + reason(err));
  };
  std::error_code ec;
  if (!fs::exists(base, ec)) {
    if (::rename(staged.c_str(), base.c_str()) != 0) fail("rename", errno);
  } else if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, base.c_str(), RENAME_EXCHANGE) != 0) {
    if (errno != EINVAL && errno != ENOSYS) fail("exchange", errno);
    // No exchange on this file system: the old folder is moved aside first (a reader in
    // between finds no folder, never a mixture).
    const std::string old = staged + ".old";
    if (::rename(base.c_str(), old.c_str()) != 0) fail("rename", errno);
    if (::rename(staged.c_str(), base.c_str()) != 0) {
      const int err = errno;
      (void)::rename(old.c_str(), base.c_str());
      fail("rename", err);
    }
    fs::remove_all(old, ec);
  }
  fs::remove_all(staged, ec);  // after an exchange: the old folder
  if (const int err = sync_folder(folder_of(base))) fail("fsync of its parent folder", err);
}

}  // namespace msa::hal
