#include "storage/store_testing.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "rocksdb/db.h"

namespace phalanx::storage::testing {

absl::Status SetRawSchemaVersion(const std::string& dir,
                                 const std::string& version) {
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
  rocksdb::ColumnFamilyHandle* meta = nullptr;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == "meta") meta = handles[i];
  }
  rocksdb::WriteOptions sync;
  sync.sync = true;
  if (meta == nullptr) {
    s = rocksdb::Status::NotFound("no meta column family in ", dir);
  } else if (version.empty()) {
    s = db->Delete(sync, meta, "schema_version");
  } else {
    s = db->Put(sync, meta, "schema_version", version);
  }
  for (rocksdb::ColumnFamilyHandle* handle : handles) {
    db->DestroyColumnFamilyHandle(handle);
  }
  const rocksdb::Status closed = db->Close();
  if (!s.ok()) return failed(s);
  return closed.ok() ? absl::OkStatus() : failed(closed);
}

}  // namespace phalanx::storage::testing
