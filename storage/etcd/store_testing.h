// Test helpers for the EtcdStateStore suites (header only, tests only).
#ifndef PHALANX_STORAGE_ETCD_STORE_TESTING_H_
#define PHALANX_STORAGE_ETCD_STORE_TESTING_H_

#include <memory>
#include <string>
#include <utility>

#include "gtest/gtest.h"
#include "storage/etcd/etcd_client.h"
#include "storage/etcd/etcd_state_store.h"
#include "storage/rocksdb_store.h"

namespace phalanx::storage::etcd::testing {

// A replica on `client` whose RocksDB lives in `dir`.
inline std::unique_ptr<EtcdStateStore> OpenReplica(
    EtcdClient* client, const std::string& dir, EtcdStateStoreOptions options) {
  auto local = RocksDbStore::Open(dir);
  EXPECT_TRUE(local.ok()) << local.status();
  return std::make_unique<EtcdStateStore>(client, std::move(*local),
                                          std::move(options));
}

// (Re)creates `prefix`/leader; returns its create revision (a new term).
inline int64_t Lead(EtcdClient* client, const std::string& prefix) {
  epb::DeleteRangeRequest del;
  del.set_key(prefix + "/leader");
  EXPECT_TRUE(client->DeleteRange(del).ok());
  epb::PutRequest put;
  put.set_key(prefix + "/leader");
  put.set_value("a 127.0.0.1:1");
  auto response = client->Put(put);
  EXPECT_TRUE(response.ok()) << response.status();
  return response.ok() ? response->header().revision() : 0;
}

// Everything `a` and `b` hold locally is the same: the loaded state, the
// retained events and the audit records.
inline void ExpectSameState(EtcdStateStore& a, EtcdStateStore& b) {
  auto x = a.LoadAll();
  auto y = b.LoadAll();
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(x->config, y->config);
  EXPECT_EQ(x->nodes, y->nodes);
  EXPECT_EQ(x->queues, y->queues);
  EXPECT_EQ(x->gangs, y->gangs);
  EXPECT_EQ(x->ledger, y->ledger);
  EXPECT_EQ(x->meta, y->meta);
  ASSERT_EQ(x->requests.size(), y->requests.size());
  for (size_t i = 0; i < x->requests.size(); ++i) {
    EXPECT_EQ(x->requests[i].request_id, y->requests[i].request_id);
    EXPECT_EQ(x->requests[i].gang_id, y->requests[i].gang_id);
    EXPECT_EQ(x->requests[i].spec_fingerprint, y->requests[i].spec_fingerprint);
    EXPECT_EQ(x->requests[i].expires, y->requests[i].expires);
  }
  auto ex = a.ReadEvents(0, 1'000'000);
  auto ey = b.ReadEvents(0, 1'000'000);
  ASSERT_TRUE(ex.ok() && ey.ok());
  ASSERT_EQ(ex->size(), ey->size());
  for (size_t i = 0; i < ex->size(); ++i) {
    EXPECT_EQ((*ex)[i].revision, (*ey)[i].revision);
    EXPECT_EQ((*ex)[i].type, (*ey)[i].type);
    ASSERT_EQ((*ex)[i].gang == nullptr, (*ey)[i].gang == nullptr);
    if ((*ex)[i].gang) {
      EXPECT_EQ(*(*ex)[i].gang, *(*ey)[i].gang);
    }
  }
  EXPECT_EQ(*a.ReadAudit(0, 1'000'000), *b.ReadAudit(0, 1'000'000));
  EXPECT_EQ(a.applied_seq(), b.applied_seq());
}

}  // namespace phalanx::storage::etcd::testing

#endif  // PHALANX_STORAGE_ETCD_STORE_TESTING_H_
