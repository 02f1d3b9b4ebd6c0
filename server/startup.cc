#include "server/startup.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace phalanx::server {
namespace {

// Reads the file at `path` and parses it with `parse`; errors name the file.
template <typename Parse>
auto ReadJson(const std::string& path, Parse parse)
    -> decltype(parse(absl::string_view())) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  auto message = parse(text.str());
  if (!message.ok()) {
    return absl::Status(message.status().code(),
                        absl::StrCat(path, ": ", message.status().message()));
  }
  return message;
}

}  // namespace

absl::StatusOr<StartupFiles> ReadStartupFiles(const std::string& config_path,
                                              const std::string& fleet_path,
                                              const std::string& queues_path) {
  StartupFiles files;
  if (!config_path.empty()) {
    ASSIGN_OR_RETURN(files.config,
                     ReadJson(config_path, convert::ConfigFromJson));
  }
  if (!fleet_path.empty()) {
    ASSIGN_OR_RETURN(files.fleet, ReadJson(fleet_path, convert::FleetFromJson));
  }
  if (!queues_path.empty()) {
    ASSIGN_OR_RETURN(files.queues,
                     ReadJson(queues_path, convert::QueuesFromJson));
  }
  return files;
}

absl::StatusOr<Recovered> Recover(core::StateStore& store,
                                  const StartupFiles& files, absl::Time now) {
  ASSIGN_OR_RETURN(core::LoadedState state, store.LoadAll());
  Recovered out;
  ASSIGN_OR_RETURN(out.scheduler,
                   core::Scheduler::Restore(std::move(state), now));
  RETURN_IF_ERROR(convert::ApplyStartupFiles(*out.scheduler, files, now));
  out.committed = out.scheduler->TakeMutation();
  if (!out.committed.empty()) RETURN_IF_ERROR(store.Commit(out.committed));
  return out;
}

absl::StatusOr<std::unique_ptr<core::Scheduler>> RecoverAndApply(
    core::StateStore& store, const StartupFiles& files, absl::Time now) {
  ASSIGN_OR_RETURN(Recovered recovered, Recover(store, files, now));
  return std::move(recovered.scheduler);
}

}  // namespace phalanx::server
