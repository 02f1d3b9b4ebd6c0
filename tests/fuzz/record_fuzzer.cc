// record_fuzzer: storage record decoding. The first input byte picks the
// record type of storage/rocksdb_store.cc's column families (gang, node,
// queue, config, event, request, ledger, meta); the rest is the stored
// value, parsed and converted exactly as RocksDbStore::LoadAll and
// ReadEvents do (proto/convert.h). A record that decodes must encode and
// decode to the same record again; then it is added to the base state
// (tests/fuzz/fixture.h) and the scheduler is restored from it, as the daemon
// does at start: Restore may refuse, naming the broken invariant, but must not
// crash, and a restored scheduler must run a cycle.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/check.h"
#include "core/memory_store.h"
#include "phalanx/storage/v1/records.pb.h"
#include "phalanx/v1/types.pb.h"
#include "proto/convert.h"
#include "tests/fuzz/fixture.h"

namespace phalanx::fuzz {
namespace {

namespace pb = ::phalanx::v1;
namespace st = ::phalanx::storage::v1;

enum Kind { kGang, kNode, kQueue, kConfig, kEvent, kRequest, kLedger, kMeta };
constexpr int kKinds = 8;

// The request record's key parts, which RocksDbStore takes from the key.
constexpr char kRequestQueue[] = "eval";
constexpr char kRequestId[] = "req-1";

// The state the base scheduler commits, as LoadAll returns it.
const core::LoadedState& BaseState() {
  static const core::LoadedState* state = [] {
    std::unique_ptr<core::Scheduler> scheduler = BaseScheduler(StartTime());
    core::MemoryStore store;
    PHALANX_CHECK(store.Commit(scheduler->TakeMutation()).ok());
    return new core::LoadedState(*store.LoadAll());
  }();
  return *state;
}

// Parses `bytes` as Record and decodes it with `decode`; on success checks
// the round trip and returns the value.
template <typename Record, typename Decode>
auto Decode(const uint8_t* data, size_t size, const char* what, Decode decode)
    -> std::optional<typename decltype(decode(Record()))::value_type> {
  Record record;
  if (!record.ParseFromArray(data, static_cast<int>(size))) return std::nullopt;
  auto value = decode(record);
  if (!value.ok()) return std::nullopt;
  RoundTrip</*kSameValue=*/false, Record>(what, *value, decode);
  return *std::move(value);
}

}  // namespace
}  // namespace phalanx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace phalanx;
  using namespace phalanx::fuzz;
  if (size < 1) return -1;
  const int kind = data[0] % kKinds;
  ++data;
  --size;
  core::LoadedState state = BaseState();
  bool restore = true;
  switch (kind) {
    case kGang: {
      auto gang = Decode<pb::Gang>(data, size, "gang", [](const pb::Gang& g) {
        return convert::GangFromProto(g);
      });
      if (!gang) return 0;
      state.gangs.push_back(*std::move(gang));
      break;
    }
    case kNode: {
      auto node = Decode<pb::Node>(data, size, "node", [](const pb::Node& n) {
        return convert::NodeFromProto(n, "node");
      });
      if (!node) return 0;
      state.nodes.push_back(*std::move(node));
      break;
    }
    case kQueue: {
      auto queue = Decode<pb::Queue>(
          data, size, "queue",
          [](const pb::Queue& q) { return Ok(convert::QueueFromProto(q)); });
      if (!queue) return 0;
      state.queues.push_back(*std::move(queue));
      break;
    }
    case kConfig: {
      auto config =
          Decode<pb::Config>(data, size, "config", [](const pb::Config& c) {
            return convert::ConfigFromProto(c, "config");
          });
      if (!config) return 0;
      state.config = *std::move(config);
      break;
    }
    case kEvent: {
      // Events are read by watchers only (ReadEvents), never restored.
      auto event = Decode<pb::GangEvent>(
          data, size, "event",
          [](const pb::GangEvent& e) { return convert::EventFromProto(e); });
      if (!event) return 0;
      restore = false;
      break;
    }
    case kRequest: {
      auto request = Decode<st::RequestRecord>(
          data, size, "request", [](const st::RequestRecord& r) {
            return Ok(convert::RequestFromProto(
                r, core::QueueName(kRequestQueue), kRequestId));
          });
      if (!request) return 0;
      state.requests.push_back(*std::move(request));
      break;
    }
    case kLedger: {
      auto entry = Decode<st::LedgerRecord>(
          data, size, "ledger", [](const st::LedgerRecord& l) {
            return Ok(convert::LedgerFromProto(l));
          });
      if (!entry) return 0;
      state.ledger.emplace_back(core::QueueName("eval"), *std::move(entry));
      break;
    }
    case kMeta: {
      auto meta = Decode<st::MetaRecord>(data, size, "meta",
                                         [](const st::MetaRecord& m) {
                                           return Ok(convert::MetaFromProto(m));
                                         });
      if (!meta) return 0;
      state.meta = *meta;
      break;
    }
  }
  if (!restore) return 0;
  const absl::Time now = StartTime() + absl::Minutes(1);
  auto scheduler = core::Scheduler::Restore(std::move(state), now);
  if (!scheduler.ok()) return 0;
  (*scheduler)->RunCycle(now);
  (void)(*scheduler)->TakeMutation();
  return 0;
}
