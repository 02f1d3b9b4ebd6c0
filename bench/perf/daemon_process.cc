#include "bench/perf/daemon_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "phalanx/v1/admin.grpc.pb.h"

namespace phalanx::perf {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

PhalanxdProcess::PhalanxdProcess(std::string binary, std::string data_dir,
                                 std::vector<std::string> args)
    : binary_(std::move(binary)),
      data_dir_(std::move(data_dir)),
      args_(std::move(args)) {}

PhalanxdProcess::~PhalanxdProcess() = default;  // the child is SIGKILLed

bool PhalanxdProcess::Start(double timeout_seconds) {
  std::vector<std::string> args = {binary_, "--listen=127.0.0.1:0",
                                   "--metrics-listen=127.0.0.1:0",
                                   "--data-dir=" + data_dir_};
  args.insert(args.end(), args_.begin(), args_.end());
  const Clock::time_point start = Clock::now();
  if (!process_.Start({.args = args,
                       .env = {},
                       .output_path = data_dir_ + ".log",
                       .append_output = false})) {
    return false;
  }
  const absl::Duration timeout = absl::Seconds(timeout_seconds);
  if (!WaitForAddresses(timeout)) return false;
  seconds_to_address_ = SecondsSince(start);
  // Answering = a real RPC through the scheduler loop succeeds.
  std::shared_ptr<grpc::Channel> channel = NewChannel();
  const absl::Duration left = timeout - absl::Seconds(SecondsSince(start));
  if (!process_.WaitUntil([&] { return Answers(channel); }, left,
                          absl::Milliseconds(1))) {
    return false;
  }
  seconds_to_serving_ = SecondsSince(start);
  return true;
}

bool PhalanxdProcess::WaitForAddresses(absl::Duration timeout) {
  const std::regex grpc_re("grpc listening on (\\S+)");
  const std::regex metrics_re("metrics listening on http://[^:]+:(\\d+)/");
  std::smatch grpc_match, metrics_match;
  std::string output;
  const bool printed = process_.WaitUntil(
      [&] {
        output = process_.Output();
        return std::regex_search(output, grpc_match, grpc_re) &&
               std::regex_search(output, metrics_match, metrics_re);
      },
      timeout);
  if (!printed) return false;
  address_ = grpc_match[1];
  metrics_port_ = std::stoi(metrics_match[1]);
  return true;
}

bool PhalanxdProcess::Answers(const std::shared_ptr<grpc::Channel>& channel) {
  if (ready_probe_) return ready_probe_(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(1));
  Authorize(context);
  v1::GetConfigRequest request;
  v1::Config response;
  return v1::Admin::NewStub(channel)
      ->GetConfig(&context, request, &response)
      .ok();
}

void PhalanxdProcess::Authorize(grpc::ClientContext& context) const {
  if (!authorization_.empty()) {
    context.AddMetadata("authorization", authorization_);
  }
}

int PhalanxdProcess::Terminate() { return process_.Stop(absl::Seconds(30)); }

int64_t PhalanxdProcess::RssBytes() const { return RssBytesOf(pid()); }

double PhalanxdProcess::Metric(const std::string& metric,
                               const std::string& label_filter) const {
  std::istringstream body(HttpGet(metrics_port_, "/metrics"));
  std::string line;
  double sum = 0;
  bool found = false;
  while (std::getline(body, line)) {
    if (line.rfind(metric, 0) != 0 || line.size() <= metric.size()) continue;
    const char next = line[metric.size()];
    if (next != ' ' && next != '{') continue;
    if (line.find(label_filter) == std::string::npos) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (absl::SimpleAtod(line.substr(space + 1), &value)) {
      sum += value;
      found = true;
    }
  }
  return found ? sum : -1;
}

std::shared_ptr<grpc::Channel> PhalanxdProcess::NewChannel(int shard) const {
  grpc::ChannelArguments args;
  // A distinct argument keeps channels from sharing one subchannel.
  args.SetInt("phalanx.perf.shard", shard);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(64 << 20);
  return grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(),
                                   args);
}

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request =
        absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    if (write(fd, request.data(), request.size()) ==
        static_cast<ssize_t>(request.size())) {
      char buffer[8192];
      ssize_t n;
      while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
        response.append(buffer, n);
      }
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

int64_t RssBytesOf(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

double CpuSecondsOf(pid_t pid) {
  if (pid <= 0) return 0;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  // Fields after the command name (which may hold spaces) in parentheses:
  // utime and stime are the 14th and 15th fields overall.
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i >= 14) ticks += std::stod(field);
  }
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

}  // namespace phalanx::perf
