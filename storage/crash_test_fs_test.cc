// CrashTestFs on its own: what a simulated power loss keeps of files and
// directory entries.
#include "storage/crash_test_fs.h"

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace phalanx::storage {
namespace {

namespace fs = std::filesystem;

class CrashTestFsTest : public ::testing::Test {
 protected:
  CrashTestFsTest() {
    char pattern[] = "/tmp/phalanx-crashfs-XXXXXX";
    root_ = mkdtemp(pattern);
    dir_ = root_ + "/db";
    fs::create_directories(dir_);
    fs::create_directories(root_ + "/scratch");
    fs_ = std::make_shared<CrashTestFs>(rocksdb::FileSystem::Default(),
                                        root_ + "/scratch");
    EXPECT_TRUE(fs_->TrackDirectory(dir_).ok());
  }
  ~CrashTestFsTest() override { fs::remove_all(root_); }

  std::unique_ptr<rocksdb::FSWritableFile> Create(const std::string& name) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    EXPECT_TRUE(
        fs_->NewWritableFile(dir_ + "/" + name, {}, &file, nullptr).ok());
    return file;
  }
  void SyncDir() {
    std::unique_ptr<rocksdb::FSDirectory> dir;
    ASSERT_TRUE(fs_->NewDirectory(dir_, {}, &dir, nullptr).ok());
    ASSERT_TRUE(dir->Fsync({}, nullptr).ok());
  }
  std::string Read(const std::string& name) {
    std::ifstream in(dir_ + "/" + name);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  bool Exists(const std::string& name) { return fs::exists(dir_ + "/" + name); }
  void LosePower() {
    fs_->Crash();
    ASSERT_TRUE(fs_->Restart(CrashTestFs::Unsynced::kDrop, 1).ok());
  }

  std::string root_, dir_;
  std::shared_ptr<CrashTestFs> fs_;
};

TEST_F(CrashTestFsTest, KeepsSyncedBytesOnly) {
  auto file = Create("wal");
  ASSERT_TRUE(file->Append("synced", {}, nullptr).ok());
  ASSERT_TRUE(file->Sync({}, nullptr).ok());
  SyncDir();
  ASSERT_TRUE(file->Append("-lost", {}, nullptr).ok());
  ASSERT_TRUE(file->Close({}, nullptr).ok());
  EXPECT_EQ(Read("wal"), "synced-lost");
  LosePower();
  EXPECT_EQ(Read("wal"), "synced");
  EXPECT_EQ(fs_->stats().bytes_dropped, 5);
}

TEST_F(CrashTestFsTest, NewEntriesNeedADirectorySync) {
  auto kept = Create("kept");
  ASSERT_TRUE(kept->Sync({}, nullptr).ok());
  SyncDir();
  auto lost = Create("lost");
  ASSERT_TRUE(lost->Append("data", {}, nullptr).ok());
  ASSERT_TRUE(lost->Sync({}, nullptr).ok());  // the file, not its name
  ASSERT_TRUE(lost->Close({}, nullptr).ok());
  ASSERT_TRUE(kept->Close({}, nullptr).ok());
  LosePower();
  EXPECT_TRUE(Exists("kept"));
  EXPECT_FALSE(Exists("lost"));
}

TEST_F(CrashTestFsTest, UnsyncedDeletesAndRenamesAreUndone) {
  auto file = Create("CURRENT");
  ASSERT_TRUE(file->Append("old", {}, nullptr).ok());
  ASSERT_TRUE(file->Sync({}, nullptr).ok());
  ASSERT_TRUE(file->Close({}, nullptr).ok());
  auto doomed = Create("doomed");
  ASSERT_TRUE(doomed->Append("still here", {}, nullptr).ok());
  ASSERT_TRUE(doomed->Sync({}, nullptr).ok());
  ASSERT_TRUE(doomed->Close({}, nullptr).ok());
  SyncDir();
  // Replace CURRENT through a temporary file; delete "doomed"; no
  // directory sync.
  auto next = Create("CURRENT.tmp");
  ASSERT_TRUE(next->Append("new", {}, nullptr).ok());
  ASSERT_TRUE(next->Sync({}, nullptr).ok());
  ASSERT_TRUE(next->Close({}, nullptr).ok());
  ASSERT_TRUE(
      fs_->RenameFile(dir_ + "/CURRENT.tmp", dir_ + "/CURRENT", {}, nullptr)
          .ok());
  ASSERT_TRUE(fs_->DeleteFile(dir_ + "/doomed", {}, nullptr).ok());
  EXPECT_EQ(Read("CURRENT"), "new");
  LosePower();
  EXPECT_EQ(Read("CURRENT"), "old");
  EXPECT_FALSE(Exists("CURRENT.tmp"));
  EXPECT_EQ(Read("doomed"), "still here");

  // The same steps with the directory synced survive.
  next = Create("CURRENT.tmp");
  ASSERT_TRUE(next->Append("new", {}, nullptr).ok());
  ASSERT_TRUE(next->Sync({}, nullptr).ok());
  ASSERT_TRUE(next->Close({}, nullptr).ok());
  ASSERT_TRUE(
      fs_->RenameFile(dir_ + "/CURRENT.tmp", dir_ + "/CURRENT", {}, nullptr)
          .ok());
  ASSERT_TRUE(fs_->DeleteFile(dir_ + "/doomed", {}, nullptr).ok());
  SyncDir();
  LosePower();
  EXPECT_EQ(Read("CURRENT"), "new");
  EXPECT_FALSE(Exists("doomed"));
}

TEST_F(CrashTestFsTest, ThePowerFailsAtTheScheduledCall) {
  auto file = Create("log");
  fs_->ScheduleCrash(2);
  EXPECT_TRUE(file->Append("a", {}, nullptr).ok());
  EXPECT_FALSE(fs_->crashed());
  EXPECT_FALSE(file->Append("b", {}, nullptr).ok());
  EXPECT_TRUE(fs_->crashed());
  EXPECT_FALSE(file->Sync({}, nullptr).ok());
  EXPECT_FALSE(fs_->DeleteFile(dir_ + "/log", {}, nullptr).ok());
  ASSERT_TRUE(file->Close({}, nullptr).ok());
  ASSERT_TRUE(fs_->Restart(CrashTestFs::Unsynced::kDrop, 1).ok());
  EXPECT_FALSE(Exists("log"));  // never in a synced directory
  EXPECT_FALSE(fs_->crashed());
}

}  // namespace
}  // namespace phalanx::storage
