#include "server/daemon_mode.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace phalanx::server {

std::string BoundAddress(const std::string& listen, int port) {
  return absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// Recovers from the local store at start; always leads.
class SingleNodeMode : public DaemonMode {
 public:
  explicit SingleNodeMode(std::unique_ptr<storage::RocksDbStore> db)
      : db_(std::move(db)) {}

  DaemonStores stores() override {
    return {db_.get(), db_.get(), db_.get(),
            [db = db_.get()](const std::string& dir) {
              return db->CreateCheckpoint(dir);
            }};
  }
  absl::StatusOr<StartState> Recover(const StartupFiles& files) override {
    ASSIGN_OR_RETURN(
        Recovered recovered,
        server::Recover(*db_, files, absl::Now(), RefusedCommit::kHold));
    PrintFileNotes(recovered);
    StartState state;
    if (!recovered.commit_refused.ok()) {
      // A full disk: serve what is durable; the loop holds the batch.
      ASSIGN_OR_RETURN(core::LoadedState durable, db_->LoadAll());
      state.view = ViewOfState(durable);
      state.held_cause = recovered.commit_refused;
      state.held = std::move(recovered.committed);
    }
    state.scheduler = std::move(recovered.scheduler);
    state.revision = state.scheduler->revision();
    state.gangs = state.scheduler->gangs().size();
    return state;
  }
  int MaxMessageBytes(int requested) override { return requested; }
  void Attach(const DaemonParts& parts) override { parts.loop->Start(); }
  void OnServing(int, grpc::HealthCheckServiceInterface*) override {}
  absl::Status Lead(const std::function<bool()>&) override {
    return absl::OkStatus();
  }
  void StopFollowing() override {}
  bool Resign() override { return false; }

 private:
  std::unique_ptr<storage::RocksDbStore> db_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<DaemonMode>> MakeSingleNodeMode(
    const std::string& data_dir, rocksdb::Env* env) {
  storage::RocksDbStore::Options options;
  options.env = env;
  ASSIGN_OR_RETURN(auto db, storage::RocksDbStore::Open(data_dir, options));
  return std::make_unique<SingleNodeMode>(std::move(db));
}

}  // namespace phalanx::server
