// `phalanxctl run`: a launcher. Submits a gang, waits for its admission
// (printing why it is pending), starts one rank per pod of the placement
// (rank r = the r-th pod of Gang.placement, even when two pods share a
// node), reports RUNNING, keeps the lease, and reports SUCCEEDED or FAILED
// from the ranks' exit codes; on preemption it stops the ranks by the grace
// deadline and acknowledges; on SIGINT/SIGTERM it stops them and cancels the
// gang. An elastic gang (a pod set with min_count below count) keeps running
// across resizes: on a grow or a shrink every rank is restarted with the new
// plan, or, with --elastic-rendezvous, only the added ranks are started and
// the removed ones stopped. The pure parts (plan, rank diffs, hostfile, argv,
// quoting) are declared here for tests. RunGang is one per process: it installs
// signal handlers for SIGINT, SIGTERM and SIGCHLD.
#ifndef PHALANX_CLIENTS_CTL_RUN_H_
#define PHALANX_CLIENTS_CTL_RUN_H_

#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "clients/ctl_args.h"
#include "clients/ctl_channel.h"
#include "phalanx/v1/types.pb.h"

namespace phalanx::ctl {

// Exit code after a preemption (without --requeue): EX_TEMPFAIL, "try
// again".
inline constexpr int kExitPreempted = 75;

// One rank of a gang: where it runs and its environment.
struct RankPlan {
  int rank = 0;
  std::string pod_set;    // the pod's pod set
  int pod_index = 0;      // the pod's index in its pod set
  std::string node;       // node id
  std::string host;       // Node.address, or the node id when it has none
  std::vector<int> gpus;  // GPU indices on that node
  // PHALANX_GANG_ID, PHALANX_NODE, PHALANX_HOSTFILE, MASTER_ADDR,
  // MASTER_PORT, NNODES, NODE_RANK, NPROC_PER_NODE, CUDA_VISIBLE_DEVICES, in
  // this order; then, for an elastic gang, PHALANX_NNODES_RANGE.
  std::vector<std::pair<std::string, std::string>> env;
};

// Returns the index of `spec`'s elastic pod set (0 < min_count < count), or
// -1 when every pod set has a fixed size.
int ElasticPodSet(const v1::GangSpec& spec);

// Returns "MIN:MAX", the fewest and the most pods (ranks) `spec` runs with:
// torchrun's --nnodes=MIN:MAX. For a fixed gang MIN equals MAX.
std::string NnodesRange(const v1::GangSpec& spec);

// Returns `gang` as it runs once its shrink is done: without the pods of its
// elastic pod set of index shrink_to_count and up (unchanged when
// shrink_to_count is 0).
v1::Gang AfterShrink(v1::Gang gang);

// What changes between two plans of one gang, a pod being its pod set and
// index (and staying the same only on the same node and GPUs).
struct RankDiff {
  std::vector<int> added;    // indices into `next`, ascending
  std::vector<int> removed;  // indices into `running`, ascending
};
RankDiff DiffRanks(const std::vector<RankPlan>& running,
                   const std::vector<RankPlan>& next);

// The address every rank uses under --exec local: all ranks run on this
// machine, whatever nodes the placement names.
inline constexpr char kLocalRankHost[] = "127.0.0.1";

// Returns the ranks of `gang`'s placement in order. `addresses` maps node
// ids to Node.address (a missing or empty address, or one equal to the id,
// falls back to the id); MASTER_ADDR is rank 0's host. NPROC_PER_NODE is
// the pod's GPU count (1 for a pod without GPUs). An elastic gang's ranks
// also get PHALANX_NNODES_RANGE (NnodesRange).
std::vector<RankPlan> PlanRanks(
    const v1::Gang& gang, const std::map<std::string, std::string>& addresses,
    int master_port, const std::string& hostfile_path);

// Returns every node of `gang`'s placement mapped to kLocalRankHost: the
// `addresses` of PlanRanks under --exec local, so that MASTER_ADDR and the
// hostfile name this machine.
std::map<std::string, std::string> LocalAddresses(const v1::Gang& gang);

// Returns OK when `host` (MASTER_ADDR) resolves on this machine
// (getaddrinfo). Else FailedPrecondition saying so, naming the host and
// how to fix it (set the node's address, or --exec local): ranks started
// with it would retry name resolution until killed.
absl::Status CheckResolves(absl::string_view host);

// Returns one "host slots=N" line per rank, in rank order (N as
// NPROC_PER_NODE).
std::string HostfileText(const std::vector<RankPlan>& ranks);

// Returns `word` quoted for a POSIX shell ('…', with ' as '\''); words of
// only [A-Za-z0-9_@%+=:,./-] stay as they are.
std::string ShellQuote(absl::string_view word);

// Returns the argv that starts `rank`. For exec "local": `command` itself
// (the caller sets the environment and the working directory). Else:
// `exec` split at spaces, with {host}, {node} and {rank} replaced, then
// "cd WORKDIR &&" (when `workdir` is not empty), "env", each K=V, and
// `command`, all shell-quoted for the remote side's shell (ssh joins its
// arguments into one command line, run in the remote $HOME).
std::vector<std::string> RankArgv(absl::string_view exec, const RankPlan& rank,
                                  absl::string_view workdir,
                                  const std::vector<std::string>& command);

// Runs `phalanxctl run` (see clients/README.md); returns the exit code: 0
// when every rank exited 0; the first failing rank's exit code (128+N for
// a signal N); 75 after a whole preemption (without --requeue; an elastic
// gang's shrink is not one); 130/143 after
// SIGINT/SIGTERM (the gang is cancelled); 1 when the gang ended otherwise,
// a call failed, or MASTER_ADDR does not resolve here (the gang is
// reported FAILED before any rank starts); 2 on a usage error; 3 when the
// daemon is unreachable.
int RunGang(const Invocation& invocation, const Connection& connection,
            std::ostream& out, std::ostream& err);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_RUN_H_
