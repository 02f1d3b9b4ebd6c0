// A GoogleTest fixture for suites that need a real etcd: a 3-member cluster
// on loopback (tests/etcd_cluster.h), started with EtcdFlags(), and a
// client connected to all of its members. Skips the test with a clear
// message when etcd is not installed.
#ifndef PHALANX_TESTS_ETCD_FIXTURE_H_
#define PHALANX_TESTS_ETCD_FIXTURE_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "storage/etcd/etcd_client.h"
#include "tests/etcd_cluster.h"

namespace phalanx::testing {

class EtcdClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!EtcdCluster::Available()) {
      GTEST_SKIP() << EtcdCluster::kEtcdPath
                   << " is absent: install etcd-server to run the etcd tests";
    }
    cluster_ = std::make_unique<EtcdCluster>(3, EtcdClusterTls{}, EtcdFlags());
    ASSERT_TRUE(cluster_->Start()) << cluster_->logs();
    storage::etcd::EtcdClientOptions options;
    options.endpoints = cluster_->endpoints();
    auto client = storage::etcd::EtcdClient::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  // Extra flags for every member (none by default).
  virtual std::vector<std::string> EtcdFlags() const { return {}; }

  std::unique_ptr<EtcdCluster> cluster_;
  std::unique_ptr<storage::etcd::EtcdClient> client_;
};

}  // namespace phalanx::testing

#endif  // PHALANX_TESTS_ETCD_FIXTURE_H_
