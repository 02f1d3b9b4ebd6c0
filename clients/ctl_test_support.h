// What the in-process phalanxctl tests share: a real gRPC server on an
// ephemeral loopback port serving a test's own service, and running a
// command line as phalanxctl would, capturing its output. Not thread-safe.
#ifndef PHALANX_CLIENTS_CTL_TEST_SUPPORT_H_
#define PHALANX_CLIENTS_CTL_TEST_SUPPORT_H_

#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/ctl_args.h"
#include "clients/ctl_commands.h"
#include "clients/ctl_format.h"
#include "grpcpp/grpcpp.h"

namespace phalanx::ctl {

// A gRPC server on 127.0.0.1 (port 0) with `credentials`, serving one
// `Service` built from `args`.
template <typename Service>
class LoopbackServer {
 public:
  template <typename... Args>
  explicit LoopbackServer(std::shared_ptr<grpc::ServerCredentials> credentials,
                          Args&&... args)
      : service_(std::forward<Args>(args)...) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", credentials, &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~LoopbackServer() { server_->Shutdown(); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  Service& service() { return service_; }

 private:
  Service service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

struct CtlRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Parses `argv` as phalanxctl would and runs it in this process.
inline CtlRun RunCtl(const std::vector<std::string>& argv,
                     const Environment& env = {}) {
  const Invocation inv = ParseCommandLine(argv, env);
  CtlRun run;
  if (!inv.error.ok()) {
    run.exit_code = kExitUsage;
    run.err = UsageErrorText(inv.error, inv.command);
    return run;
  }
  std::ostringstream out;
  std::ostringstream err;
  run.exit_code = RunCommand(inv, out, err);
  run.out = out.str();
  run.err = err.str();
  return run;
}

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_TEST_SUPPORT_H_
