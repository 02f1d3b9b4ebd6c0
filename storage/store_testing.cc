#include "storage/store_testing.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"

namespace phalanx::storage::testing {

absl::Status WriteRawRecord(const std::string& dir, const std::string& family,
                            const std::string& key,
                            const std::optional<std::string>& value) {
  auto failed = [](const rocksdb::Status& s) {
    return absl::InternalError(s.ToString());
  };
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), dir, &names);
  if (!s.ok()) return failed(s);
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names) {
    families.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  s = rocksdb::DB::Open(rocksdb::DBOptions(), dir, families, &handles, &raw);
  if (!s.ok()) return failed(s);
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::ColumnFamilyHandle* handle = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == family) handle = handles[i];
  }
  rocksdb::WriteOptions sync;
  sync.sync = true;
  if (handle == nullptr) {
    s = rocksdb::Status::NotFound("no column family " + family + " in ", dir);
  } else if (!value) {
    s = db->Delete(sync, handle, key);
  } else {
    s = db->Put(sync, handle, key, *value);
  }
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    db->DestroyColumnFamilyHandle(h);
  }
  const rocksdb::Status closed = db->Close();
  if (!s.ok()) return failed(s);
  return closed.ok() ? absl::OkStatus() : failed(closed);
}

absl::Status SetRawSchemaVersion(const std::string& dir,
                                 const std::string& version) {
  std::optional<std::string> value;
  if (!version.empty()) value = version;
  return WriteRawRecord(dir, "meta", "schema_version", value);
}

}  // namespace phalanx::storage::testing
