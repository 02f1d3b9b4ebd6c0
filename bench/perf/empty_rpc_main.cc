// phalanx-empty-rpc: the other physical limit of a durable SubmitGang — the
// cost of being a gRPC service (bench/perf/README.md). Serves one unary RPC,
// phalanx.bench.v1.Baseline/Empty, on the server set-up phalanxd uses: the
// same credentials (insecure on loopback, as the load generator runs it),
// the same --auth file read into the same Authenticator, the same Gate
// (authentication, role and request rate of SubmitGang), the metrics
// interceptor on every call, the callback API with gRPC's default executor,
// the same largest message and the default health service. Its request is
// a SubmitGangRequest; its answer a fixed SubmitGangResponse (--response, a
// serialized one the load generator took from the daemon), so both
// directions carry what a submit carries. It does nothing else: no loop, no
// store. Prints "grpc listening on HOST:PORT" like phalanxd; exits on
// SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "baseline.grpc.pb.h"
#include "bench/flags.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "proto/auth_config.h"
#include "server/auth.h"
#include "server/gate.h"
#include "server/metrics.h"
#include "server/rpc.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "gRPC address (port 0: any)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:0", "/metrics address");
ABSL_FLAG(std::string, auth, "", "Principals, as phalanxd's --auth");
ABSL_FLAG(std::string, response, "",
          "A serialized phalanx.v1.SubmitGangResponse to answer with");
ABSL_FLAG(int, max_message_bytes, 4 << 20, "Largest request accepted");
ABSL_FLAG(std::string, data_dir, "",
          "Ignored (accepted so it starts like phalanxd; it stores nothing)");

namespace phalanx::perf {
namespace {

class BaselineService final : public bench::v1::Baseline::CallbackService {
 public:
  BaselineService(server::Gate* gate, v1::SubmitGangResponse response)
      : gate_(gate), response_(std::move(response)) {}

  grpc::ServerUnaryReactor* Empty(grpc::CallbackServerContext* context,
                                  const v1::SubmitGangRequest* request,
                                  v1::SubmitGangResponse* response) override {
    auto caller = gate_->Admit(*context, server::rpc::kSubmitGang,
                               request->spec().queue());
    if (!caller.ok()) return server::FinishNow(context, caller.status());
    *response = response_;
    return server::FinishNow(context, absl::OkStatus());
  }

 private:
  server::Gate* const gate_;
  const v1::SubmitGangResponse response_;
};

int Fail(const std::string& message) {
  std::fprintf(stderr, "phalanx-empty-rpc: %s\n", message.c_str());
  return 1;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int Serve() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  std::unique_ptr<server::Authenticator> authenticator;
  if (const std::string path = absl::GetFlag(FLAGS_auth); path.empty()) {
    authenticator = std::make_unique<server::Authenticator>();
  } else {
    auto policy = auth::ParseAuthConfigJson(ReadFile(path));
    if (!policy.ok()) return Fail(policy.status().ToString());
    authenticator = std::make_unique<server::Authenticator>(*std::move(policy));
  }
  v1::SubmitGangResponse canned;
  if (const std::string path = absl::GetFlag(FLAGS_response);
      !path.empty() && !canned.ParseFromString(ReadFile(path))) {
    return Fail("--response " + path + ": not a SubmitGangResponse");
  }
  server::Metrics metrics(absl::GetFlag(FLAGS_metrics_listen), nullptr);
  server::Gate gate(authenticator.get(), &metrics, nullptr);
  BaselineService service(&gate, std::move(canned));

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::GetFlag(FLAGS_listen),
                           grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(absl::GetFlag(FLAGS_max_message_bytes));
  builder.RegisterService(&service);
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(metrics.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  if (grpc_server == nullptr || port == 0) return Fail("cannot listen");
  const std::string listen = absl::GetFlag(FLAGS_listen);
  std::printf("phalanx-empty-rpc: grpc listening on %s:%d\n",
              listen.substr(0, listen.rfind(':')).c_str(), port);
  std::printf("phalanx-empty-rpc: metrics listening on http://127.0.0.1:%d/\n",
              metrics.port());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&signals, &signal);
  grpc_server->Shutdown(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(500));
  metrics.StopServing();
  return 0;
}

}  // namespace
}  // namespace phalanx::perf

int main(int argc, char** argv) {
  // As phalanxd: Abseil's deadlock detection off, flags with dashes too.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<std::string> args =
      phalanx::bench::UnderscoreFlagNames(argc, argv);
  std::vector<char*> underscored;
  for (std::string& arg : args) underscored.push_back(arg.data());
  absl::ParseCommandLine(static_cast<int>(underscored.size()),
                         underscored.data());
  return phalanx::perf::Serve();
}
