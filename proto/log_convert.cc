#include "proto/log_convert.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "proto/convert.h"

namespace phalanx::convert {
namespace {

namespace spb = ::phalanx::storage::v1;

// The records' parts of `mutation` (everything but gangs, nodes and queues).
void RecordsToProto(const core::Mutation& m, spb::LogBatch* out) {
  for (const core::RequestRecord& record : m.requests_put) {
    spb::KeyedRequest* keyed = out->add_requests_put();
    keyed->mutable_key()->set_queue(record.queue.value());
    keyed->mutable_key()->set_request_id(record.request_id);
    ToProto(record, keyed->mutable_record());
  }
  for (const auto& [queue, id] : m.requests_deleted) {
    spb::RequestKey* key = out->add_requests_deleted();
    key->set_queue(queue.value());
    key->set_request_id(id);
  }
  for (const auto& [queue, entry] : m.ledger_put) {
    spb::KeyedLedger* keyed = out->add_ledger_put();
    keyed->set_queue(queue.value());
    ToProto(entry, keyed->mutable_record());
  }
  for (const core::QueueName& queue : m.ledger_deleted) {
    out->add_ledger_deleted(queue.value());
  }
  for (const core::Event& event : m.events) ToProto(event, out->add_events());
  out->set_trim_events_before(m.trim_events_before);
  for (const core::AuditRecord& record : m.audit_put) {
    ToProto(record, out->add_audit_put());
  }
  out->set_trim_audit_before(m.trim_audit_before);
  ToProto(m.meta, out->mutable_meta());
  if (m.startup_files) {
    ToProto(*m.startup_files, out->mutable_startup_files());
  }
}

absl::Status DataLoss(const absl::Status& status, absl::string_view what) {
  return absl::DataLossError(
      absl::StrCat("log batch ", what, ": ", status.message()));
}

// The records' parts of `batch` into `m`.
absl::Status RecordsFromProto(const spb::LogBatch& batch, core::Mutation& m) {
  for (const spb::KeyedRequest& keyed : batch.requests_put()) {
    m.requests_put.push_back(
        RequestFromProto(keyed.record(), core::QueueName(keyed.key().queue()),
                         keyed.key().request_id()));
  }
  for (const spb::RequestKey& key : batch.requests_deleted()) {
    m.requests_deleted.emplace_back(core::QueueName(key.queue()),
                                    key.request_id());
  }
  for (const spb::KeyedLedger& keyed : batch.ledger_put()) {
    m.ledger_put.emplace_back(core::QueueName(keyed.queue()),
                              LedgerFromProto(keyed.record()));
  }
  for (const std::string& queue : batch.ledger_deleted()) {
    m.ledger_deleted.emplace_back(queue);
  }
  for (const pb::GangEvent& proto : batch.events()) {
    absl::StatusOr<core::Event> event = EventFromProto(proto);
    if (!event.ok()) return DataLoss(event.status(), "event");
    m.events.push_back(std::move(*event));
  }
  m.trim_events_before = batch.trim_events_before();
  for (const pb::AuditRecord& proto : batch.audit_put()) {
    m.audit_put.push_back(AuditFromProto(proto));
  }
  m.trim_audit_before = batch.trim_audit_before();
  m.meta = MetaFromProto(batch.meta());
  if (batch.has_startup_files()) {
    m.startup_files = StartupFilesFromProto(batch.startup_files());
  }
  return absl::OkStatus();
}

}  // namespace

void ToProto(const core::Mutation& m, spb::LogBatch* out) {
  for (const core::GangPtr& gang : m.gangs_put) {
    ToProto(*gang, out->add_gangs_put());
  }
  for (const core::GangId& id : m.gangs_deleted) {
    out->add_gangs_deleted(id.value());
  }
  for (const core::Node& node : m.nodes_put)
    ToProto(node, out->add_nodes_put());
  for (const core::NodeId& id : m.nodes_deleted) {
    out->add_nodes_deleted(id.value());
  }
  for (const core::Queue& queue : m.queues_put) {
    ToProto(queue, out->add_queues_put());
  }
  for (const core::QueueName& name : m.queues_deleted) {
    out->add_queues_deleted(name.value());
  }
  if (m.config) ToProto(*m.config, out->mutable_config());
  RecordsToProto(m, out);
}

absl::StatusOr<core::Mutation> MutationFromProto(const spb::LogBatch& batch) {
  core::Mutation m;
  for (const pb::Gang& proto : batch.gangs_put()) {
    absl::StatusOr<core::Gang> gang = GangFromProto(proto);
    if (!gang.ok()) return DataLoss(gang.status(), "gang");
    m.gangs_put.push_back(std::make_shared<const core::Gang>(std::move(*gang)));
  }
  for (const std::string& id : batch.gangs_deleted()) {
    m.gangs_deleted.emplace_back(id);
  }
  for (const pb::Node& proto : batch.nodes_put()) {
    absl::StatusOr<core::Node> node = NodeFromProto(proto, "node");
    if (!node.ok()) return DataLoss(node.status(), "node");
    m.nodes_put.push_back(std::move(*node));
  }
  for (const std::string& id : batch.nodes_deleted()) {
    m.nodes_deleted.emplace_back(id);
  }
  for (const pb::Queue& proto : batch.queues_put()) {
    m.queues_put.push_back(QueueFromProto(proto));
  }
  for (const std::string& name : batch.queues_deleted()) {
    m.queues_deleted.emplace_back(name);
  }
  if (batch.has_config()) {
    absl::StatusOr<core::Config> config =
        ConfigFromProto(batch.config(), "config");
    if (!config.ok()) return DataLoss(config.status(), "config");
    m.config = std::move(*config);
  }
  if (absl::Status s = RecordsFromProto(batch, m); !s.ok()) return s;
  return m;
}

std::string DeterministicBytes(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream out(&bytes);
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }  // the stream writes its last bytes as it closes
  return bytes;
}

}  // namespace phalanx::convert
