// Start-up of phalanxd: reading the --config, --fleet and --queues files
// (the proto3 JSON form of the API's own messages; parsed and applied by
// proto/startup_files.h) and recovering or creating the scheduler from the
// store. A file is applied only when its text differs from the text last
// applied from it (its SHA-256 is stored with the state, in the batch that
// applied it), so a restart or a failover with unchanged files keeps every
// change made at run time (docs/design.md §7, "Start-up files"). Runs
// before any thread starts; the functions are thread-compatible.
#ifndef PHALANX_SERVER_STARTUP_H_
#define PHALANX_SERVER_STARTUP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/scheduler.h"
#include "core/state_store.h"
#include "proto/startup_files.h"

namespace phalanx::server {

// Where a start-up file came from and the SHA-256 (lower-case hex) of its
// text; both empty when its flag was not given.
struct StartupFileSource {
  std::string path;
  std::string sha256;
};

// The start-up files as read: what they say and where each came from.
struct StartupFiles {
  convert::StartupFiles parsed;
  StartupFileSource config;
  StartupFileSource fleet;
  StartupFileSource queues;
};

// Reads and parses the files whose paths are non-empty. Errors name the
// file: NotFound when it cannot be opened, InvalidArgument when it is not
// the JSON form of its message.
absl::StatusOr<StartupFiles> ReadStartupFiles(const std::string& config_path,
                                              const std::string& fleet_path,
                                              const std::string& queues_path);

// A recovered scheduler, the batch recovery committed (empty when it
// committed none), and one line per start-up file given, saying whether it
// was applied ("--queues q.json: applied (sha256 1f2e3d4c5b6a, 2 queues
// written)") or not ("--queues q.json: unchanged since it was last applied
// (sha256 1f2e3d4c5b6a); not applied, run-time changes kept").
struct Recovered {
  std::unique_ptr<core::Scheduler> scheduler;
  core::Mutation committed;
  std::vector<std::string> file_notes;
  // With RefusedCommit::kHold: why the store refused to commit `committed`
  // (a full disk; it is not durable and the loop must hold it), else OK.
  absl::Status commit_refused;
};

// What Recover does when the store refuses its batch for lack of space
// (ResourceExhausted): fail, or return it uncommitted for the loop to hold.
enum class RefusedCommit { kFail, kHold };

// Loads the store into a scheduler (or creates one on an empty store),
// applies each start-up file whose SHA-256 differs from the one stored for
// its flag (a file never applied counts as changed) — config first, then
// fleet, then queues; a queue or node in the file is set to the file's
// values, one absent from it is left alone — and commits the result with
// the new hashes in one batch. Fails, naming the cause, when recovery
// finds a broken invariant or a file is rejected (nothing is committed).
absl::StatusOr<Recovered> Recover(core::StateStore& store,
                                  const StartupFiles& files, absl::Time now,
                                  RefusedCommit refused = RefusedCommit::kFail);

// Prints each of `recovered`'s file notes on stdout as a "phalanxd: " line.
void PrintFileNotes(const Recovered& recovered);

// Recover, returning the scheduler only.
absl::StatusOr<std::unique_ptr<core::Scheduler>> RecoverAndApply(
    core::StateStore& store, const StartupFiles& files, absl::Time now);

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_STARTUP_H_
