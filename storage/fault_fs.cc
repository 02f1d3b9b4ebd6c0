#include "storage/fault_fs.h"

#include <utility>

#include "storage/sync/mutex.h"

namespace phalanx::storage {
namespace {

using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;

}  // namespace

std::unique_ptr<rocksdb::Env> NewFaultEnv(std::shared_ptr<FaultFs> fs) {
  return rocksdb::NewCompositeEnv(std::move(fs));
}

// A writable file whose writes and syncs go through the FaultFs's faults.
class FaultFs::File : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  File(FaultFs* fs, std::unique_ptr<rocksdb::FSWritableFile> file)
      : FSWritableFileOwnerWrapper(std::move(file)), fs_(fs) {}

  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  IODebugContext* dbg) override {
    IOStatus s = fs_->BeforeWrite();
    return s.ok() ? target()->Append(data, options, dbg) : s;
  }
  IOStatus Append(const rocksdb::Slice& data, const IOOptions& options,
                  const rocksdb::DataVerificationInfo& info,
                  IODebugContext* dbg) override {
    IOStatus s = fs_->BeforeWrite();
    return s.ok() ? target()->Append(data, options, info, dbg) : s;
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& options,
                            IODebugContext* dbg) override {
    IOStatus s = fs_->BeforeWrite();
    return s.ok() ? target()->PositionedAppend(data, offset, options, dbg) : s;
  }
  IOStatus PositionedAppend(const rocksdb::Slice& data, uint64_t offset,
                            const IOOptions& options,
                            const rocksdb::DataVerificationInfo& info,
                            IODebugContext* dbg) override {
    IOStatus s = fs_->BeforeWrite();
    return s.ok() ? target()->PositionedAppend(data, offset, options, info, dbg)
                  : s;
  }
  IOStatus Sync(const IOOptions& options, IODebugContext* dbg) override {
    absl::SleepFor(fs_->sync_delay());
    IOStatus s = target()->Sync(options, dbg);
    if (s.ok()) fs_->OnSynced();
    return s;
  }
  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override {
    absl::SleepFor(fs_->sync_delay());
    IOStatus s = target()->Fsync(options, dbg);
    if (s.ok()) fs_->OnSynced();
    return s;
  }

 private:
  FaultFs* fs_;
};

void FaultFs::SetNoSpace(bool no_space) {
  MutexLock lock(&mu_);
  no_space_ = no_space;
}

void FaultFs::FailWrite(int64_t n) {
  MutexLock lock(&mu_);
  fail_countdown_ = n;
}

void FaultFs::SetSyncDelay(absl::Duration delay) {
  MutexLock lock(&mu_);
  sync_delay_ = delay;
}

FaultFs::Stats FaultFs::stats() const {
  MutexLock lock(&mu_);
  return stats_;
}

IOStatus FaultFs::BeforeWrite() {
  MutexLock lock(&mu_);
  if (no_space_) {
    ++stats_.no_space_failures;
    // As RocksDB's POSIX file system reports ENOSPC.
    IOStatus s = IOStatus::NoSpace("FaultFs", "No space left on device");
    s.SetRetryable(true);
    return s;
  }
  if (fail_countdown_ > 0 && --fail_countdown_ == 0) {
    ++stats_.io_failures;
    return IOStatus::IOError("FaultFs", "Input/output error");
  }
  ++stats_.writes;
  return IOStatus::OK();
}

absl::Duration FaultFs::sync_delay() const {
  MutexLock lock(&mu_);
  return sync_delay_;
}

void FaultFs::OnSynced() {
  MutexLock lock(&mu_);
  ++stats_.syncs;
}

IOStatus FaultFs::Wrap(IOStatus opened,
                       std::unique_ptr<rocksdb::FSWritableFile> file,
                       std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (opened.ok()) *result = std::make_unique<File>(this, std::move(file));
  return opened;
}

IOStatus FaultFs::NewWritableFile(
    const std::string& f, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->NewWritableFile(f, options, &file, dbg);
  return Wrap(std::move(s), std::move(file), result);
}

IOStatus FaultFs::ReopenWritableFile(
    const std::string& f, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->ReopenWritableFile(f, options, &file, dbg);
  return Wrap(std::move(s), std::move(file), result);
}

IOStatus FaultFs::ReuseWritableFile(
    const std::string& f, const std::string& old_f,
    const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext* dbg) {
  std::unique_ptr<rocksdb::FSWritableFile> file;
  IOStatus s = target()->ReuseWritableFile(f, old_f, options, &file, dbg);
  return Wrap(std::move(s), std::move(file), result);
}

IOStatus FaultFs::GetFreeSpace(const std::string& path,
                               const IOOptions& options, uint64_t* diskfree,
                               IODebugContext* dbg) {
  {
    MutexLock lock(&mu_);
    if (no_space_) {
      *diskfree = 0;
      return IOStatus::OK();
    }
  }
  return target()->GetFreeSpace(path, options, diskfree, dbg);
}

}  // namespace phalanx::storage
