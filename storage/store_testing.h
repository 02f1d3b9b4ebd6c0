// Test-only helpers that write a data dir the way another release of
// phalanxd would, with RocksDB itself rather than RocksDbStore.
#ifndef PHALANX_STORAGE_STORE_TESTING_H_
#define PHALANX_STORAGE_STORE_TESTING_H_

#include <optional>
#include <string>

#include "absl/status/status.h"

namespace phalanx::storage::testing {

// Sets the meta family's "schema_version" key of the (closed) data dir
// `dir` to `version`; an empty `version` deletes the key, as in a data dir
// of the release before schema versions.
absl::Status SetRawSchemaVersion(const std::string& dir,
                                 const std::string& version);

// Puts `value` under `key` in column family `family` of the (closed) data
// dir `dir`, or deletes the key when `value` is nullopt: a record as a
// damaged store or a bug would leave it, bypassing RocksDbStore.
absl::Status WriteRawRecord(const std::string& dir, const std::string& family,
                            const std::string& key,
                            const std::optional<std::string>& value);

// Drops column family `family` (and its records) from the (closed) data
// dir `dir`: a data dir of a release before that family existed.
absl::Status DropRawFamily(const std::string& dir, const std::string& family);

}  // namespace phalanx::storage::testing

#endif  // PHALANX_STORAGE_STORE_TESTING_H_
