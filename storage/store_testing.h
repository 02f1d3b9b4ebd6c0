// Test-only helpers that write a data dir the way another release of
// phalanxd would, with RocksDB itself rather than RocksDbStore.
#ifndef PHALANX_STORAGE_STORE_TESTING_H_
#define PHALANX_STORAGE_STORE_TESTING_H_

#include <string>

#include "absl/status/status.h"

namespace phalanx::storage::testing {

// Sets the meta family's "schema_version" key of the (closed) data dir
// `dir` to `version`; an empty `version` deletes the key, as in a data dir
// of the release before schema versions.
absl::Status SetRawSchemaVersion(const std::string& dir,
                                 const std::string& version);

}  // namespace phalanx::storage::testing

#endif  // PHALANX_STORAGE_STORE_TESTING_H_
