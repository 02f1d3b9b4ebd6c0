// RawRocksDb: the physical limit of a durable write on this machine — plain
// RocksDB WriteBatches with sync=true from N concurrent writers (RocksDB
// groups concurrent writers under one fsync), in its own directory, with the
// store's DB options. Thread-safe after Open.
#ifndef PHALANX_BENCH_PERF_RAW_ROCKSDB_H_
#define PHALANX_BENCH_PERF_RAW_ROCKSDB_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/perf/closed_loop.h"

namespace rocksdb {
class DB;
}

namespace phalanx::perf {

class RawRocksDb {
 public:
  static absl::StatusOr<std::unique_ptr<RawRocksDb>> Open(
      const std::string& dir);
  ~RawRocksDb();

  // `clients` writers, each writing one WriteBatch of one `value_bytes`
  // value (sync=true) per call, for `seconds`.
  ClosedLoopResult Run(int clients, double seconds, int value_bytes);

 private:
  RawRocksDb() = default;
  std::unique_ptr<rocksdb::DB> db_;
};

}  // namespace phalanx::perf

#endif  // PHALANX_BENCH_PERF_RAW_ROCKSDB_H_
