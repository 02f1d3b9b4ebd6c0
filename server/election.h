// Election: the port through which a replica becomes and stays the leader
// of the HA mode (docs/ha.md). The daemon campaigns, and while leading
// fences every commit with the term it won (storage/etcd's EtcdStateStore);
// implemented on etcd by server/etcd_election.h. Core needs none of this.
// Implementations say whether they are thread-safe.
#ifndef PHALANX_SERVER_ELECTION_H_
#define PHALANX_SERVER_ELECTION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace phalanx::server {

class Election {
 public:
  virtual ~Election() = default;
  // Blocks until this replica leads, then returns its term (strictly larger
  // than every earlier term). Fails with DeadlineExceeded when another
  // replica still leads at `deadline`.
  virtual absl::StatusOr<int64_t> Campaign(absl::Time deadline) = 0;
  // True from a won Campaign until leadership is lost or resigned. Safety
  // never rests on it: commits are fenced by the term.
  virtual bool leading() const = 0;
  // Gives leadership up at once, so another replica may win.
  virtual absl::Status Resign() = 0;
};

}  // namespace phalanx::server

#endif  // PHALANX_SERVER_ELECTION_H_
