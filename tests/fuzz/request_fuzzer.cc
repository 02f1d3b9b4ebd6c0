// request_fuzzer: a session of API calls (tests/fuzz/session.proto), each
// request message parsed from bytes, converted and validated exactly as the
// gRPC handlers of server/*_service.cc do, then applied to one core::Scheduler
// recovered from an empty store with the base files (tests/fuzz/fixture.h).
// After every call the admission cycle runs, as the scheduler loop runs it
// after a batch; every mutation is checked to read back unchanged through the
// storage encoding and committed to a MemoryStore; at the end the scheduler
// must restore from that store (no GPU held twice, no gang partly placed).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/check.h"
#include "core/memory_store.h"
#include "core/scheduler.h"
#include "proto/convert.h"
#include "tests/fuzz/fixture.h"
#include "tests/fuzz/session.pb.h"

namespace phalanx::fuzz {
namespace {

namespace pb = ::phalanx::v1;

constexpr int kMaxCalls = 64;
constexpr uint32_t kMaxAdvanceSeconds = 7 * 24 * 3600;

// server/rpc.cc's RequireNonEmpty: handlers reject an empty id before the
// loop.
bool NonEmpty(const std::string& value) { return !value.empty(); }

// As server/scheduler_service.cc's ReportFromProto.
absl::StatusOr<core::GangReport> ReportFromProto(
    const pb::ReportGangRequest& request) {
  core::GangReport report;
  report.gang_id = core::GangId(request.gang_id());
  if (request.state() != pb::GANG_STATE_UNSPECIFIED) {
    auto state = convert::GangStateFromProto(request.state(), "state");
    if (!state.ok()) return state.status();
    report.state = *state;
  }
  if (request.has_last_checkpoint_time()) {
    report.last_checkpoint_time =
        convert::FromProto(request.last_checkpoint_time());
  }
  report.preemption_acknowledged = request.preemption_acknowledged();
  report.message = request.message();
  return report;
}

// What the handler does with the call; returns whether it was a mutating
// command that reached the scheduler. Errors are the client's and ignored.
bool Apply(const Call& call, core::Scheduler& s, absl::Time now) {
  switch (call.request_case()) {
    case Call::kSubmit: {
      auto spec = convert::GangSpecFromProto(call.submit().spec(), "spec");
      if (!spec.ok()) return false;
      auto result = s.Submit(*std::move(spec), now);
      if (result.ok()) PHALANX_CHECK(result->gang != nullptr);
      return true;
    }
    case Call::kDryRun: {
      auto spec = convert::GangSpecFromProto(call.dry_run().spec(), "spec");
      if (!spec.ok()) return false;
      auto result = s.DryRun(*std::move(spec));
      if (result.ok() && result->placed) {
        for (const core::PodPlacement& pod : result->pods) {
          pb::PodPlacement out;
          convert::ToProto(pod, &out);
        }
      }
      return false;
    }
    case Call::kCancel:
      if (!NonEmpty(call.cancel().gang_id())) return false;
      (void)s.Cancel(core::GangId(call.cancel().gang_id()),
                     call.cancel().reason(), now);
      return true;
    case Call::kReport: {
      if (!NonEmpty(call.report().gang_id())) return false;
      auto report = ReportFromProto(call.report());
      if (!report.ok()) return false;
      (void)s.Report(*report, now);
      return true;
    }
    case Call::kRenewLease:
      if (!NonEmpty(call.renew_lease().gang_id())) return false;
      (void)s.RenewLease(core::GangId(call.renew_lease().gang_id()), now);
      return true;
    case Call::kExplain: {
      if (!NonEmpty(call.explain().gang_id())) return false;
      auto explanation = s.Explain(core::GangId(call.explain().gang_id()));
      if (explanation.ok()) {
        pb::Gang out;
        convert::ToProto(*explanation->gang, &out);
      }
      return false;
    }
    case Call::kListGangs: {
      // As server/scheduler_service.cc's StatesFilter; the listing itself
      // reads the published snapshot, not the scheduler.
      const pb::ListGangsRequest& request = call.list_gangs();
      for (int i = 0; i < request.states_size(); ++i) {
        if (!convert::GangStateFromProto(request.states(i),
                                         absl::StrCat("states[", i, "]"))
                 .ok()) {
          return false;
        }
      }
      return false;
    }
    case Call::kGetGang:
      if (core::GangPtr gang =
              s.FindGang(core::GangId(call.get_gang().gang_id()))) {
        pb::Gang out;
        convert::ToProto(*gang, &out);
      }
      return false;
    case Call::kUpsertNodes: {
      std::vector<core::Node> nodes;
      for (int i = 0; i < call.upsert_nodes().nodes_size(); ++i) {
        auto node = convert::NodeFromProto(call.upsert_nodes().nodes(i),
                                           absl::StrCat("nodes[", i, "]"));
        if (!node.ok()) return false;
        nodes.push_back(*std::move(node));
      }
      (void)s.UpsertNodes(std::move(nodes));
      return true;
    }
    case Call::kSetNodeState: {
      const pb::SetNodeStateRequest& request = call.set_node_state();
      if (!NonEmpty(request.node_id())) return false;
      auto state = convert::NodeStateFromProto(request.state(), "state");
      if (!state.ok()) return false;
      std::optional<absl::Time> deadline;
      if (request.has_drain_deadline()) {
        deadline = convert::FromProto(request.drain_deadline());
      }
      (void)s.SetNodeState(core::NodeId(request.node_id()), *state,
                           request.reason(), now, deadline);
      return true;
    }
    case Call::kRemoveNode:
      if (!NonEmpty(call.remove_node().node_id())) return false;
      (void)s.RemoveNode(core::NodeId(call.remove_node().node_id()));
      return true;
    case Call::kHeartbeat: {
      std::vector<core::NodeId> ids;
      for (const std::string& id : call.heartbeat().node_ids()) {
        if (!NonEmpty(id)) return false;
        ids.emplace_back(id);
      }
      (void)s.Heartbeat(ids, now);
      return false;
    }
    case Call::kListNodes:
      if (call.list_nodes().state() != pb::NODE_STATE_UNSPECIFIED) {
        (void)convert::NodeStateFromProto(call.list_nodes().state(), "state");
      }
      return false;
    case Call::kUpdateConfig: {
      auto config =
          convert::ConfigFromProto(call.update_config().config(), "config");
      if (!config.ok()) return false;
      std::optional<int64_t> expected;
      if (call.update_config().has_expected_version()) {
        expected = call.update_config().expected_version();
      }
      (void)s.UpdateConfig(*std::move(config), expected);
      return true;
    }
    case Call::kPutQueue:
      (void)s.PutQueue(convert::QueueFromProto(call.put_queue().queue()));
      return true;
    case Call::kDeleteQueue:
      if (!NonEmpty(call.delete_queue().name())) return false;
      (void)s.DeleteQueue(core::QueueName(call.delete_queue().name()));
      return true;
    case Call::REQUEST_NOT_SET:
      return false;
  }
  return false;
}

}  // namespace
}  // namespace phalanx::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace phalanx;
  fuzz::Session session;
  if (!session.ParseFromArray(data, static_cast<int>(size))) return -1;
  if (session.calls_size() > fuzz::kMaxCalls) return -1;

  absl::Time now = fuzz::StartTime();
  std::unique_ptr<core::Scheduler> scheduler = fuzz::BaseScheduler(now);
  core::MemoryStore store;
  auto commit = [&] {
    const core::Mutation mutation = scheduler->TakeMutation();
    fuzz::CheckStorageRoundTrip(mutation);
    if (!mutation.empty()) PHALANX_CHECK(store.Commit(mutation).ok());
  };
  commit();
  for (const fuzz::Call& call : session.calls()) {
    now += absl::Seconds(
        std::min(call.advance_seconds(), fuzz::kMaxAdvanceSeconds));
    // The loop runs a cycle after a mutating batch or when its timer is due;
    // here after every call.
    fuzz::Apply(call, *scheduler, now);
    scheduler->RunCycle(now);
    commit();
  }

  auto loaded = store.LoadAll();
  PHALANX_CHECK(loaded.ok());
  auto restored = core::Scheduler::Restore(*std::move(loaded), now);
  if (!restored.ok()) {
    std::fprintf(stderr, "restore failed: %s\n",
                 restored.status().ToString().c_str());
    std::abort();
  }
  PHALANX_CHECK((*restored)->revision() == scheduler->revision());
  return 0;
}
