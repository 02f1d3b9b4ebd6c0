#include "bench/perf/raw_rocksdb.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace phalanx::perf {

absl::StatusOr<std::unique_ptr<RawRocksDb>> RawRocksDb::Open(
    const std::string& dir) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.max_total_wal_size = 64ull << 20;  // as storage/ opens it
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, dir, &db);
  if (!s.ok())
    return absl::InternalError(absl::StrCat("open ", dir, ": ", s.ToString()));
  std::unique_ptr<RawRocksDb> raw(new RawRocksDb());
  raw->db_.reset(db);
  return raw;
}

RawRocksDb::~RawRocksDb() {
  if (db_) db_->Close();
}

ClosedLoopResult RawRocksDb::Run(int clients, double seconds, int value_bytes) {
  static std::atomic<int64_t> next_key{0};
  const std::string value(value_bytes, 'v');
  rocksdb::WriteOptions sync;
  sync.sync = true;
  return RunClosedLoop(clients, seconds, /*max_ops_per_client=*/10'000'000,
                       [&](int, int64_t) -> absl::Status {
                         rocksdb::WriteBatch batch;
                         batch.Put(absl::StrFormat("k%016d", next_key++),
                                   value);
                         rocksdb::Status s = db_->Write(sync, &batch);
                         if (s.ok()) return absl::OkStatus();
                         return absl::InternalError(s.ToString());
                       });
}

}  // namespace phalanx::perf
