#include "server/startup.h"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "server/auth.h"

namespace phalanx::server {
namespace {

// Reads the file at `path` (when non-empty) into `parsed` with `parse`,
// and records where it came from in `source`; errors name the file.
template <typename Message, typename Parse>
absl::Status ReadInto(const std::string& path, Parse parse,
                      std::optional<Message>& parsed,
                      StartupFileSource& source) {
  if (path.empty()) return absl::OkStatus();
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<Message> message = parse(text.str());
  if (!message.ok()) {
    return absl::Status(message.status().code(),
                        absl::StrCat(path, ": ", message.status().message()));
  }
  parsed = *std::move(message);
  source = {path, HexOf(Sha256Of(text.str()))};
  return absl::OkStatus();
}

// The parsed files whose text differs from the one `applied` records.
convert::StartupFiles Changed(const StartupFiles& files,
                              const core::StartupFileHashes& applied) {
  convert::StartupFiles changed;
  if (files.config.sha256 != applied.config) {
    changed.config = files.parsed.config;
  }
  if (files.fleet.sha256 != applied.fleet) changed.fleet = files.parsed.fleet;
  if (files.queues.sha256 != applied.queues) {
    changed.queues = files.parsed.queues;
  }
  return changed;
}

// `applied` with the hash of each file given replaced by its own.
core::StartupFileHashes Updated(const StartupFiles& files,
                                core::StartupFileHashes applied) {
  if (!files.config.path.empty()) applied.config = files.config.sha256;
  if (!files.fleet.path.empty()) applied.fleet = files.fleet.sha256;
  if (!files.queues.path.empty()) applied.queues = files.queues.sha256;
  return applied;
}

// One line on the file of `flag`: applied (and what it wrote) or not.
std::string Note(const char* flag, const StartupFileSource& source,
                 bool applied, const std::string& written) {
  const std::string sha = source.sha256.substr(0, 12);
  if (!applied) {
    return absl::StrCat("--", flag, " ", source.path,
                        ": unchanged since it was last applied (sha256 ", sha,
                        "); not applied, run-time changes kept");
  }
  return absl::StrCat("--", flag, " ", source.path, ": applied (sha256 ", sha,
                      ", ", written, ")");
}

// The notes for every file given, `changed` being those applied and
// `committed` what the batch wrote.
std::vector<std::string> Notes(const StartupFiles& files,
                               const convert::StartupFiles& changed,
                               const core::Mutation& committed,
                               const core::Config& config) {
  std::vector<std::string> notes;
  if (!files.config.path.empty()) {
    notes.push_back(Note("config", files.config, changed.config.has_value(),
                         committed.config
                             ? absl::StrCat("config version ", config.version)
                             : std::string("the config in force already")));
  }
  if (!files.fleet.path.empty()) {
    notes.push_back(
        Note("fleet", files.fleet, changed.fleet.has_value(),
             absl::StrCat(committed.nodes_put.size(), " nodes written")));
  }
  if (!files.queues.path.empty()) {
    notes.push_back(
        Note("queues", files.queues, changed.queues.has_value(),
             absl::StrCat(committed.queues_put.size(), " queues written")));
  }
  return notes;
}

}  // namespace

absl::StatusOr<StartupFiles> ReadStartupFiles(const std::string& config_path,
                                              const std::string& fleet_path,
                                              const std::string& queues_path) {
  StartupFiles files;
  RETURN_IF_ERROR(ReadInto(config_path, convert::ConfigFromJson,
                           files.parsed.config, files.config));
  RETURN_IF_ERROR(ReadInto(fleet_path, convert::FleetFromJson,
                           files.parsed.fleet, files.fleet));
  RETURN_IF_ERROR(ReadInto(queues_path, convert::QueuesFromJson,
                           files.parsed.queues, files.queues));
  return files;
}

absl::StatusOr<Recovered> Recover(core::StateStore& store,
                                  const StartupFiles& files, absl::Time now,
                                  RefusedCommit refused) {
  ASSIGN_OR_RETURN(core::LoadedState state, store.LoadAll());
  const core::StartupFileHashes applied = state.startup_files;
  Recovered out;
  ASSIGN_OR_RETURN(out.scheduler,
                   core::Scheduler::Restore(std::move(state), now));
  const convert::StartupFiles changed = Changed(files, applied);
  RETURN_IF_ERROR(convert::ApplyStartupFiles(*out.scheduler, changed, now));
  out.committed = out.scheduler->TakeMutation();
  // The hashes ride in the batch that applied their files: a crash leaves
  // both or neither.
  if (const core::StartupFileHashes next = Updated(files, applied);
      next != applied) {
    out.committed.startup_files = next;
  }
  if (!out.committed.empty()) {
    absl::Status committed = store.Commit(out.committed);
    if (refused == RefusedCommit::kHold &&
        absl::IsResourceExhausted(committed)) {
      out.commit_refused = committed;
    } else {
      RETURN_IF_ERROR(committed);
    }
  }
  out.file_notes =
      Notes(files, changed, out.committed, out.scheduler->config());
  return out;
}

void PrintFileNotes(const Recovered& recovered) {
  for (const std::string& note : recovered.file_notes) {
    std::printf("phalanxd: %s\n", note.c_str());
  }
  std::fflush(stdout);
}

absl::StatusOr<std::unique_ptr<core::Scheduler>> RecoverAndApply(
    core::StateStore& store, const StartupFiles& files, absl::Time now) {
  ASSIGN_OR_RETURN(Recovered recovered, Recover(store, files, now));
  return std::move(recovered.scheduler);
}

}  // namespace phalanx::server
