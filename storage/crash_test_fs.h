// CrashTestFs: a rocksdb::FileSystem for power-loss tests. It forwards every
// call to a real file system (files live in real directories) and remembers
// what the calls made durable:
//   - of each file, the length it had at its last Sync/Fsync (Append,
//     Truncate and Close make nothing durable; RangeSync is a hint only);
//   - of each tracked directory, the entries it held at its last Fsync
//     (creating, renaming, linking or deleting a file is not durable until
//     then).
// Crash() is the power going off: from then on every mutating call fails
// with an IOError (reads still work), so the RocksDB instance above can only
// be closed. Restart() then puts the real directories in the state the disk
// would be found in after the power loss — each tracked directory holding
// exactly the entries of its last Fsync, each file cut to its synced length
// (or, with kKeepSomeUnsynced, a random longer prefix of what was written, as
// when the page cache wrote part of it back) — and powers on again.
// ScheduleCrash(n) makes the n-th next mutating call the one the power fails
// at, so crashes land inside commits, flushes, compactions and recovery.
//
// Real syncs are never issued (durability is simulated, so tests run at the
// speed of the page cache). Directories are tracked once TrackDirectory
// names them; others pass through untouched, as do files created by other
// means than this file system (RocksDB's info LOG). Creating a directory is
// taken as durable at once. NewRandomRWFile is refused in tracked
// directories (RocksDB uses it for neither the WAL nor the MANIFEST nor
// SSTs).
//
// Test infrastructure, not for production. Thread-safe.
#ifndef PHALANX_STORAGE_CRASH_TEST_FS_H_
#define PHALANX_STORAGE_CRASH_TEST_FS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "storage/sync/mutex.h"

namespace phalanx::storage {

class CrashTestFs : public rocksdb::FileSystemWrapper {
 public:
  // What Restart keeps of bytes written since a file's last sync.
  enum class Unsynced { kDrop, kKeepSomeUnsynced };

  // What the file system has done since it was made.
  struct Stats {
    int64_t crashes = 0;
    int64_t file_syncs = 0;
    int64_t dir_syncs = 0;
    int64_t bytes_dropped = 0;     // unsynced bytes cut off by Restart
    int64_t entries_dropped = 0;   // unsynced creations and renames undone
    int64_t entries_restored = 0;  // unsynced deletions and renames undone
  };

  // `scratch_dir` must exist, be empty and be on the same file system as
  // the tracked directories (it holds hard links to files whose only name
  // is not durable yet).
  CrashTestFs(std::shared_ptr<rocksdb::FileSystem> base,
              std::string scratch_dir);
  ~CrashTestFs() override;

  static const char* kClassName() { return "PhalanxCrashTestFs"; }
  const char* Name() const override { return kClassName(); }

  // Tracks the existing directory `dir`; its current entries and their
  // contents count as durable.
  absl::Status TrackDirectory(const std::string& dir);
  // The power fails at the `ops`-th next mutating call (1 = the next one);
  // 0 cancels a scheduled crash.
  void ScheduleCrash(int64_t ops);
  // The power fails now.
  void Crash();
  bool crashed() const;
  // Puts the tracked directories in their after-the-crash state and powers
  // on. Requires crashed() and no file of a tracked directory open for
  // writing (close the database first). `seed` drives kKeepSomeUnsynced.
  absl::Status Restart(Unsynced unsynced, uint64_t seed);
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
  rocksdb::IOStatus NewRandomRWFile(
      const std::string& f, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSRandomRWFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus NewDirectory(const std::string& name,
                                 const rocksdb::IOOptions& options,
                                 std::unique_ptr<rocksdb::FSDirectory>* result,
                                 rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& f,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus RenameFile(const std::string& from, const std::string& to,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus LinkFile(const std::string& from, const std::string& to,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus Truncate(const std::string& f, size_t size,
                             const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDir(const std::string& d,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus CreateDirIfMissing(const std::string& d,
                                       const rocksdb::IOOptions& options,
                                       rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteDir(const std::string& d,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override;

 private:
  class File;
  class Directory;
  // One file's content, whatever names it has.
  struct Inode {
    uint64_t id = 0;
    uint64_t synced_bytes = 0;
  };
  using InodePtr = std::shared_ptr<Inode>;
  // name (within its directory) -> inode.
  using Entries = std::map<std::string, InodePtr>;
  struct Dir {
    Entries current;
    Entries durable;  // as of the last Fsync
  };

  // Counts one mutating call; false when the power is (now) off.
  bool Tick() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  rocksdb::IOStatus PowerOff() const;
  // The tracked directory of `path` and the file's name in it; null when
  // untracked.
  Dir* Lookup(const std::string& path, std::string* name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before `dir/name` stops naming `inode`: keeps a hard link in the
  // scratch directory when a durable entry still names it.
  void Preserve(const std::string& path, const InodePtr& inode)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DurablyNamed(const Inode& inode) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string ScratchPath(const Inode& inode) const;
  // Removes scratch links no durable entry needs any more.
  void CollectScratch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wraps a writable file of a tracked directory.
  std::unique_ptr<rocksdb::FSWritableFile> Wrap(
      std::unique_ptr<rocksdb::FSWritableFile> file, InodePtr inode);
  void OnSynced(Inode& inode, uint64_t bytes);
  void OnDirSynced(const std::string& dir);

  const std::string scratch_dir_;
  mutable Mutex mu_;
  std::map<std::string, Dir> dirs_ ABSL_GUARDED_BY(mu_);
  // Inodes with a hard link in the scratch directory, by id.
  std::map<uint64_t, InodePtr> scratch_ ABSL_GUARDED_BY(mu_);
  uint64_t next_inode_ ABSL_GUARDED_BY(mu_) = 1;
  bool crashed_ ABSL_GUARDED_BY(mu_) = false;
  int64_t crash_countdown_ ABSL_GUARDED_BY(mu_) = 0;
  Stats stats_ ABSL_GUARDED_BY(mu_);
};

// An Env for RocksDbStore::Options::env whose files go through `fs`. Its
// clock sleeps at most a millisecond: RocksDB backs off a second after a
// failed background compaction, which after a simulated power loss only
// makes closing the database wait.
std::unique_ptr<rocksdb::Env> NewCrashTestEnv(std::shared_ptr<CrashTestFs> fs);

}  // namespace phalanx::storage

#endif  // PHALANX_STORAGE_CRASH_TEST_FS_H_
