#include "storage/crash_test_fs.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "rocksdb/system_clock.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage {
namespace {

namespace fs = std::filesystem;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

std::string Normal(const std::string& path) {
  std::string normal = fs::path(path).lexically_normal().string();
  while (normal.size() > 1 && normal.back() == '/') normal.pop_back();
  return normal;
}

// The real clock, with sleeps cut to a millisecond.
class ShortSleepClock : public rocksdb::SystemClockWrapper {
 public:
  explicit ShortSleepClock(const std::shared_ptr<rocksdb::SystemClock>& clock)
      : SystemClockWrapper(clock) {}
  static const char* kClassName() { return "PhalanxShortSleepClock"; }
  const char* Name() const override { return kClassName(); }
  void SleepForMicroseconds(int micros) override {
    SystemClockWrapper::SleepForMicroseconds(std::min(micros, 1000));
  }
};

// Env::Default's threads, `fs`'s files and the short-sleep clock.
class CrashTestEnv : public rocksdb::EnvWrapper {
 public:
  CrashTestEnv(std::unique_ptr<rocksdb::Env> composite,
               std::shared_ptr<rocksdb::FileSystem> fs)
      : EnvWrapper(std::move(composite)) {
    file_system_ = std::move(fs);
    system_clock_ =
        std::make_shared<ShortSleepClock>(rocksdb::SystemClock::Default());
  }
  static const char* kClassName() { return "PhalanxCrashTestEnv"; }
  const char* Name() const override { return kClassName(); }
  void SleepForMicroseconds(int micros) override {
    system_clock_->SleepForMicroseconds(micros);
  }
};

}  // namespace

std::unique_ptr<rocksdb::Env> NewCrashTestEnv(std::shared_ptr<CrashTestFs> fs) {
  std::unique_ptr<rocksdb::Env> composite = rocksdb::NewCompositeEnv(fs);
  return std::make_unique<CrashTestEnv>(std::move(composite), std::move(fs));
}

// A writable file of a tracked directory: counts its mutating calls and
// records the length it had at each sync.
class CrashTestFs::File : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  File(CrashTestFs* fs, std::unique_ptr<rocksdb::FSWritableFile> file,
       InodePtr inode)
      : FSWritableFileOwnerWrapper(std::move(file)),
        fs_(fs),
        inode_(std::move(inode)) {}

  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  IODebugContext* dbg) override {
    if (!Tick()) return fs_->PowerOff();
    return target()->Append(data, options, dbg);
  }
  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    if (!Tick()) return fs_->PowerOff();
    return target()->Append(data, options, info, dbg);
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& options,
                            IODebugContext* dbg) override {
    if (!Tick()) return fs_->PowerOff();
    return target()->PositionedAppend(data, offset, options, dbg);
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    if (!Tick()) return fs_->PowerOff();
    return target()->PositionedAppend(data, offset, options, info, dbg);
  }
  IOStatus Truncate(uint64_t size, const IOOptions& options,
                    IODebugContext* dbg) override {
    if (!Tick()) return fs_->PowerOff();
    IOStatus s = target()->Truncate(size, options, dbg);
    MutexLock lock(&fs_->mu_);
    inode_->synced_bytes = std::min<uint64_t>(inode_->synced_bytes, size);
    return s;
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    return SyncNow(options, dbg);
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return SyncNow(options, dbg);
  }
  // A hint to start writeback; never a durability point.
  IOStatus RangeSync(uint64_t, uint64_t, const IOOptions&,
                     IODebugContext*) override {
    return IOStatus::OK();
  }

 private:
  bool Tick() {
    MutexLock lock(&fs_->mu_);
    return fs_->Tick();
  }
  // The real file is not synced: durability is simulated.
  IOStatus SyncNow(const IOOptions& options, IODebugContext* dbg) {
    if (!Tick()) return fs_->PowerOff();
    IOStatus s = target()->Flush(options, dbg);
    if (!s.ok()) return s;
    fs_->OnSynced(*inode_, target()->GetFileSize(options, dbg));
    return IOStatus::OK();
  }

  CrashTestFs* fs_;
  InodePtr inode_;
};

// A directory handle: Fsync makes the tracked directory's entries durable.
class CrashTestFs::Directory : public rocksdb::FSDirectoryWrapper {
 public:
  Directory(CrashTestFs* fs, std::string path,
            std::unique_ptr<rocksdb::FSDirectory> dir)
      : FSDirectoryWrapper(std::move(dir)), fs_(fs), path_(std::move(path)) {}

  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    return FsyncWithDirOptions(options, dbg, rocksdb::DirFsyncOptions());
  }
  IOStatus FsyncWithDirOptions(
      const IOOptions& options, IODebugContext* dbg,
      const rocksdb::DirFsyncOptions& dir_options) override {
    {
      MutexLock lock(&fs_->mu_);
      if (fs_->dirs_.count(path_) > 0) {
        if (!fs_->Tick()) return fs_->PowerOff();
        fs_->OnDirSynced(path_);
        return IOStatus::OK();
      }
    }
    return FSDirectoryWrapper::FsyncWithDirOptions(options, dbg, dir_options);
  }

 private:
  CrashTestFs* fs_;
  const std::string path_;
};

CrashTestFs::CrashTestFs(std::shared_ptr<rocksdb::FileSystem> base,
                         std::string scratch_dir)
    : FileSystemWrapper(base), scratch_dir_(Normal(scratch_dir)) {}

CrashTestFs::~CrashTestFs() = default;

absl::Status CrashTestFs::TrackDirectory(const std::string& dir) {
  const std::string path = Normal(dir);
  MutexLock lock(&mu_);
  Dir& tracked = dirs_[path];
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, error)) {
    if (!entry.is_regular_file()) continue;
    auto inode = std::make_shared<Inode>();
    inode->id = next_inode_++;
    inode->synced_bytes = entry.file_size();
    tracked.current[entry.path().filename().string()] = inode;
  }
  if (error) {
    dirs_.erase(path);
    return absl::InternalError(
        absl::StrCat("list ", path, ": ", error.message()));
  }
  tracked.durable = tracked.current;
  return absl::OkStatus();
}

void CrashTestFs::ScheduleCrash(int64_t ops) {
  MutexLock lock(&mu_);
  crash_countdown_ = ops;
}

void CrashTestFs::Crash() {
  MutexLock lock(&mu_);
  if (!crashed_) ++stats_.crashes;
  crashed_ = true;
}

bool CrashTestFs::crashed() const {
  MutexLock lock(&mu_);
  return crashed_;
}

CrashTestFs::Stats CrashTestFs::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

bool CrashTestFs::Tick() {
  if (crashed_) return false;
  if (crash_countdown_ > 0 && --crash_countdown_ == 0) {
    crashed_ = true;
    ++stats_.crashes;
    return false;
  }
  return true;
}

IOStatus CrashTestFs::PowerOff() const {
  // Not retryable and data lost: RocksDB does not try to resume in the
  // background (which would keep Close waiting a second per retry).
  IOStatus s = IOStatus::IOError("simulated power loss");
  s.SetRetryable(false);
  s.SetDataLoss(true);
  return s;
}

CrashTestFs::Dir* CrashTestFs::Lookup(const std::string& path,
                                      std::string* name) {
  const fs::path normal(Normal(path));
  auto it = dirs_.find(normal.parent_path().string());
  if (it == dirs_.end()) return nullptr;
  *name = normal.filename().string();
  return &it->second;
}

bool CrashTestFs::DurablyNamed(const Inode& inode) const {
  for (const auto& [path, dir] : dirs_) {
    for (const auto& [name, durable] : dir.durable) {
      if (durable.get() == &inode) return true;
    }
  }
  return false;
}

std::string CrashTestFs::ScratchPath(const Inode& inode) const {
  return absl::StrCat(scratch_dir_, "/inode-", inode.id);
}

void CrashTestFs::Preserve(const std::string& path, const InodePtr& inode) {
  if (scratch_.count(inode->id) > 0 || !DurablyNamed(*inode)) return;
  std::error_code error;
  fs::create_hard_link(path, ScratchPath(*inode), error);
  if (!error) scratch_[inode->id] = inode;
}

void CrashTestFs::CollectScratch() {
  for (auto it = scratch_.begin(); it != scratch_.end();) {
    if (DurablyNamed(*it->second)) {
      ++it;
      continue;
    }
    std::error_code error;
    fs::remove(ScratchPath(*it->second), error);
    it = scratch_.erase(it);
  }
}

void CrashTestFs::OnSynced(Inode& inode, uint64_t bytes) {
  MutexLock lock(&mu_);
  inode.synced_bytes = bytes;
  ++stats_.file_syncs;
}

void CrashTestFs::OnDirSynced(const std::string& dir) {
  Dir& tracked = dirs_[dir];
  tracked.durable = tracked.current;
  ++stats_.dir_syncs;
  CollectScratch();
}

std::unique_ptr<rocksdb::FSWritableFile> CrashTestFs::Wrap(
    std::unique_ptr<rocksdb::FSWritableFile> file, InodePtr inode) {
  return std::make_unique<File>(this, std::move(file), std::move(inode));
}

IOStatus CrashTestFs::NewWritableFile(
    const std::string& f, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string name;
  Dir* dir = Lookup(f, &name);
  if (dir == nullptr) return target()->NewWritableFile(f, options, result, dbg);
  if (!Tick()) return PowerOff();
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->NewWritableFile(f, options, &file, dbg);
  if (!s.ok()) return s;
  InodePtr& inode = dir->current[name];
  if (inode == nullptr) {
    inode = std::make_shared<Inode>();
    inode->id = next_inode_++;
  }
  // An existing file is truncated: none of its old content is durable.
  inode->synced_bytes = 0;
  *result = Wrap(std::move(file), inode);
  return IOStatus::OK();
}

IOStatus CrashTestFs::ReopenWritableFile(
    const std::string& f, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string name;
  Dir* dir = Lookup(f, &name);
  if (dir == nullptr) {
    return target()->ReopenWritableFile(f, options, result, dbg);
  }
  if (!Tick()) return PowerOff();
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->ReopenWritableFile(f, options, &file, dbg);
  if (!s.ok()) return s;
  InodePtr& inode = dir->current[name];
  if (inode == nullptr) {
    inode = std::make_shared<Inode>();
    inode->id = next_inode_++;
  }
  *result = Wrap(std::move(file), inode);
  return IOStatus::OK();
}

IOStatus CrashTestFs::ReuseWritableFile(
    const std::string& f, const std::string& old_f,
    const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  IOStatus s = RenameFile(old_f, f, options.io_options, dbg);
  if (!s.ok()) return s;
  return NewWritableFile(f, options, result, dbg);
}

IOStatus CrashTestFs::NewRandomRWFile(
    const std::string& f, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSRandomRWFile>* result, IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    std::string name;
    if (Lookup(f, &name) != nullptr) {
      return IOStatus::NotSupported("CrashTestFs: random-access writes");
    }
  }
  return target()->NewRandomRWFile(f, options, result, dbg);
}

IOStatus CrashTestFs::NewDirectory(
    const std::string& name, const IOOptions& options,
    std::unique_ptr<rocksdb::FSDirectory>* result, IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSDirectory> dir;
  IOStatus s = target()->NewDirectory(name, options, &dir, dbg);
  if (!s.ok()) return s;
  *result = std::make_unique<Directory>(this, Normal(name), std::move(dir));
  return IOStatus::OK();
}

IOStatus CrashTestFs::DeleteFile(const std::string& f, const IOOptions& options,
                                 IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string name;
  Dir* dir = Lookup(f, &name);
  if (dir == nullptr) return target()->DeleteFile(f, options, dbg);
  if (!Tick()) return PowerOff();
  auto it = dir->current.find(name);
  if (it != dir->current.end()) Preserve(f, it->second);
  IOStatus s = target()->DeleteFile(f, options, dbg);
  if (s.ok() && it != dir->current.end()) dir->current.erase(it);
  return s;
}

IOStatus CrashTestFs::RenameFile(const std::string& from, const std::string& to,
                                 const IOOptions& options,
                                 IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string from_name, to_name;
  Dir* from_dir = Lookup(from, &from_name);
  Dir* to_dir = Lookup(to, &to_name);
  if (from_dir == nullptr && to_dir == nullptr) {
    return target()->RenameFile(from, to, options, dbg);
  }
  if (!Tick()) return PowerOff();
  InodePtr moved;
  if (from_dir != nullptr) {
    auto it = from_dir->current.find(from_name);
    if (it != from_dir->current.end()) moved = it->second;
  }
  if (to_dir != nullptr) {
    auto it = to_dir->current.find(to_name);
    if (it != to_dir->current.end()) Preserve(to, it->second);
  }
  if (moved != nullptr && to_dir == nullptr) Preserve(from, moved);
  IOStatus s = target()->RenameFile(from, to, options, dbg);
  if (!s.ok()) return s;
  if (from_dir != nullptr) from_dir->current.erase(from_name);
  if (to_dir != nullptr) {
    if (moved == nullptr) {
      // From outside the model (an untracked file): taken as written and
      // synced.
      std::error_code error;
      moved = std::make_shared<Inode>();
      moved->id = next_inode_++;
      moved->synced_bytes = fs::file_size(to, error);
    }
    to_dir->current[to_name] = moved;
  }
  return s;
}

IOStatus CrashTestFs::LinkFile(const std::string& from, const std::string& to,
                               const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string from_name, to_name;
  Dir* from_dir = Lookup(from, &from_name);
  Dir* to_dir = Lookup(to, &to_name);
  if (from_dir == nullptr && to_dir == nullptr) {
    return target()->LinkFile(from, to, options, dbg);
  }
  if (!Tick()) return PowerOff();
  IOStatus s = target()->LinkFile(from, to, options, dbg);
  if (!s.ok() || to_dir == nullptr) return s;
  InodePtr inode;
  if (from_dir != nullptr) {
    auto it = from_dir->current.find(from_name);
    if (it != from_dir->current.end()) inode = it->second;
  }
  if (inode == nullptr) {
    std::error_code error;
    inode = std::make_shared<Inode>();
    inode->id = next_inode_++;
    inode->synced_bytes = fs::file_size(to, error);
  }
  to_dir->current[to_name] = inode;
  return s;
}

IOStatus CrashTestFs::Truncate(const std::string& f, size_t size,
                               const IOOptions& options, IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string name;
  Dir* dir = Lookup(f, &name);
  if (dir == nullptr) return target()->Truncate(f, size, options, dbg);
  if (!Tick()) return PowerOff();
  IOStatus s = target()->Truncate(f, size, options, dbg);
  auto it = dir->current.find(name);
  if (s.ok() && it != dir->current.end()) {
    it->second->synced_bytes =
        std::min<uint64_t>(it->second->synced_bytes, size);
  }
  return s;
}

IOStatus CrashTestFs::CreateDir(const std::string& d, const IOOptions& options,
                                IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    std::string name;
    if (Lookup(d, &name) != nullptr && !Tick()) return PowerOff();
  }
  return target()->CreateDir(d, options, dbg);
}

IOStatus CrashTestFs::CreateDirIfMissing(const std::string& d,
                                         const IOOptions& options,
                                         IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    std::string name;
    if ((Lookup(d, &name) != nullptr || dirs_.count(Normal(d)) > 0) &&
        !Tick()) {
      return PowerOff();
    }
  }
  return target()->CreateDirIfMissing(d, options, dbg);
}

IOStatus CrashTestFs::DeleteDir(const std::string& d, const IOOptions& options,
                                IODebugContext* dbg) {
  MutexLock lock(&mu_);
  std::string name;
  if (Lookup(d, &name) != nullptr || dirs_.count(Normal(d)) > 0) {
    if (!Tick()) return PowerOff();
  }
  IOStatus s = target()->DeleteDir(d, options, dbg);
  if (s.ok()) dirs_.erase(Normal(d));
  return s;
}

absl::Status CrashTestFs::Restart(Unsynced unsynced, uint64_t seed) {
  MutexLock lock(&mu_);
  if (!crashed_) return absl::FailedPreconditionError("Restart: no crash");
  std::mt19937_64 rng(seed);
  std::error_code error;
  auto fail = [&](absl::string_view what, const std::string& path) {
    return absl::InternalError(
        absl::StrCat(what, " ", path, ": ", error.message()));
  };
  // 1. Every current name goes; the inodes a durable entry names stay
  // reachable through the scratch directory.
  for (auto& [path, dir] : dirs_) {
    for (const auto& [name, inode] : dir.current) {
      const std::string file = absl::StrCat(path, "/", name);
      Preserve(file, inode);
      auto durable = dir.durable.find(name);
      if (durable == dir.durable.end() || durable->second != inode) {
        ++stats_.entries_dropped;
      }
      fs::remove(file, error);
      if (error) return fail("remove", file);
    }
    for (const auto& [name, inode] : dir.durable) {
      auto current = dir.current.find(name);
      if (current == dir.current.end() || current->second != inode) {
        ++stats_.entries_restored;
      }
    }
  }
  // 2. Each surviving inode keeps its synced bytes (and, optionally, some
  // of the rest).
  CollectScratch();
  for (auto& [id, inode] : scratch_) {
    const std::string file = ScratchPath(*inode);
    const uint64_t size = fs::file_size(file, error);
    if (error) return fail("size of", file);
    uint64_t keep = std::min(inode->synced_bytes, size);
    if (unsynced == Unsynced::kKeepSomeUnsynced && size > keep) {
      keep += rng() % (size - keep + 1);
    }
    stats_.bytes_dropped += static_cast<int64_t>(size - keep);
    if (keep < size) {
      fs::resize_file(file, keep, error);
      if (error) return fail("truncate", file);
    }
    inode->synced_bytes = keep;
  }
  // 3. Each directory gets back the entries of its last Fsync.
  for (auto& [path, dir] : dirs_) {
    for (const auto& [name, inode] : dir.durable) {
      const std::string file = absl::StrCat(path, "/", name);
      fs::remove(file, error);  // an untracked file of that name
      fs::create_hard_link(ScratchPath(*inode), file, error);
      if (error) return fail("restore", file);
    }
    dir.current = dir.durable;
  }
  for (const auto& [id, inode] : scratch_) {
    fs::remove(ScratchPath(*inode), error);
  }
  scratch_.clear();
  crashed_ = false;
  crash_countdown_ = 0;
  return absl::OkStatus();
}

}  // namespace phalanx::storage
