// FaultFs: a rocksdb::FileSystem for disk-fault tests. It forwards every call
// to a real file system and can be switched, at any time, to misbehave the
// way full, failing and slow disks do:
//   - SetNoSpace(true): every write into a file (Append, PositionedAppend)
//     fails with "No space left on device" (a retryable NoSpace IOError, as
//     RocksDB's POSIX file system reports ENOSPC), and GetFreeSpace reports 0;
//     SetNoSpace(false) is the operator freeing space.
//   - FailWrite(n): the n-th next write into a file fails once with a
//     non-retryable IOError (an EIO: a failing device, not a full one).
//   - SetSyncDelay(d): every Sync/Fsync of a file waits `d` before syncing
//     (a slow disk), so nothing made durable is reported durable early.
// Reads, renames, deletions and directory calls are never faulted. Unlike
// storage/crash_test_fs.h (power loss), data is really written and synced.
//
// Test infrastructure, not for production. Thread-safe.
#ifndef PHALANX_STORAGE_FAULT_FS_H_
#define PHALANX_STORAGE_FAULT_FS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage {

class FaultFs : public rocksdb::FileSystemWrapper {
 public:
  // What the file system has done since it was made.
  struct Stats {
    int64_t writes = 0;             // Append/PositionedAppend calls that wrote
    int64_t syncs = 0;              // Sync/Fsync calls completed
    int64_t no_space_failures = 0;  // writes refused for lack of space
    int64_t io_failures = 0;        // writes failed by FailWrite
  };

  explicit FaultFs(std::shared_ptr<rocksdb::FileSystem> base)
      : FileSystemWrapper(std::move(base)) {}

  static const char* kClassName() { return "PhalanxFaultFs"; }
  const char* Name() const override { return kClassName(); }

  // Whether writes fail for lack of space (see the file comment).
  void SetNoSpace(bool no_space);
  // The `n`-th next write into a file (1 = the next one) fails with an
  // IOError; 0 cancels.
  void FailWrite(int64_t n);
  // Each later file sync waits `delay` first; zero for none.
  void SetSyncDelay(absl::Duration delay);
  Stats stats() const;

  // rocksdb::FileSystem.
  rocksdb::IOStatus NewWritableFile(
      const std::string& f, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& f, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& f, const std::string& old_f,
      const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus GetFreeSpace(const std::string& path,
                                 const rocksdb::IOOptions& options,
                                 uint64_t* diskfree,
                                 rocksdb::IODebugContext* dbg) override;

 private:
  class File;
  // `file` wrapped in a File into `result` when `opened` is OK; `opened`.
  rocksdb::IOStatus Wrap(rocksdb::IOStatus opened,
                         std::unique_ptr<rocksdb::FSWritableFile> file,
                         std::unique_ptr<rocksdb::FSWritableFile>* result);
  // The fault (if any) of one write about to happen; counts it.
  rocksdb::IOStatus BeforeWrite();
  // The delay each file sync waits first.
  absl::Duration sync_delay() const;
  // Counts one completed file sync.
  void OnSynced();

  mutable Mutex mu_;
  bool no_space_ ABSL_GUARDED_BY(mu_) = false;
  int64_t fail_countdown_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration sync_delay_ ABSL_GUARDED_BY(mu_);
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// An Env for RocksDbStore::Options::env whose files go through `fs` (threads
// and clock are Env::Default's): RocksDB's composite Env over `fs`.
std::unique_ptr<rocksdb::Env> NewFaultEnv(std::shared_ptr<FaultFs> fs);

}  // namespace phalanx::storage

#endif  // PHALANX_STORAGE_FAULT_FS_H_
