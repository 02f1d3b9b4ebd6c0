#include "storage/store_testing.h"

#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"

namespace phalanx::storage::testing {

namespace {

absl::Status Failed(const rocksdb::Status& s) {
  return absl::InternalError(s.ToString());
}

// Opens the (closed) data dir `dir` with every family it has, runs `change`
// on it (the handles in the order of `names`), and closes it.
absl::Status ChangeRaw(
    const std::string& dir,
    const std::function<rocksdb::Status(
        rocksdb::DB&, const std::vector<std::string>& names,
        const std::vector<rocksdb::ColumnFamilyHandle*>& handles)>& change) {
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names);
  if (!s.ok()) return Failed(s);
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(rocksdb::DBOptions(), dir, families, &handles, &raw);
  if (!s.ok()) return Failed(s);
  std::unique_ptr<rocksdb::DB> db(raw);
  s = change(*db, names, handles);
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h);
  }
  const rocksdb::Status closed = db->Close();
  if (!s.ok()) return Failed(s);
  return closed.ok() ? absl::OkStatus() : Failed(closed);
}

// The handle of family `family` among `handles` (named by `names`); null
// when there is none.
rocksdb::ColumnFamilyHandle* Find(
    const std::string& family, const std::vector<std::string>& names,
    const std::vector<rocksdb::ColumnFamilyHandle*>& handles) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == family) return handles[i];
  }
  return nullptr;
}

}  // namespace

absl::Status WriteRawRecord(const std::string& dir, const std::string& family,
                            const std::string& key,
                            const std::optional<std::string>& value) {
  return ChangeRaw(
      dir, [&](rocksdb::DB& db, const auto& names, const auto& handles) {
        rocksdb::ColumnFamilyHandle* handle = Find(family, names, handles);
        rocksdb::WriteOptions sync;
        sync.sync = true;
        if (handle == nullptr) {
          return rocksdb::Status::NotFound(
              "no column family " + family + " in ", dir);
        }
        return value ? db.Put(sync, handle, key, *value)
                     : db.Delete(sync, handle, key);
      });
}

absl::Status DropRawFamily(const std::string& dir, const std::string& family) {
  return ChangeRaw(
      dir, [&](rocksdb::DB& db, const auto& names, const auto& handles) {
        rocksdb::ColumnFamilyHandle* handle = Find(family, names, handles);
        if (handle == nullptr) {
          return rocksdb::Status::NotFound(
              "no column family " + family + " in ", dir);
        }
        return db.DropColumnFamily(handle);
      });
}

absl::Status SetRawSchemaVersion(const std::string& dir,
                                 const std::string& version) {
  std::optional<std::string> value;
  if (!version.empty()) value = version;
  return WriteRawRecord(dir, "meta", "schema_version", value);
}

}  // namespace phalanx::storage::testing
