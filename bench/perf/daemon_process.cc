#include "bench/perf/daemon_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

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

PhalanxdProcess::~PhalanxdProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (output_fd_ >= 0) close(output_fd_);
}

void PhalanxdProcess::DrainOutput(int timeout_ms) {
  pollfd pfd{output_fd_, POLLIN, 0};
  if (poll(&pfd, 1, timeout_ms) <= 0) return;
  char buffer[4096];
  const ssize_t n = read(output_fd_, buffer, sizeof(buffer));
  if (n > 0) output_.append(buffer, n);
}

bool PhalanxdProcess::Start(double timeout_seconds) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  std::vector<std::string> argv_strings = {binary_, "--listen=127.0.0.1:0",
                                           "--metrics-listen=127.0.0.1:0",
                                           "--data-dir=" + data_dir_};
  argv_strings.insert(argv_strings.end(), args_.begin(), args_.end());
  const Clock::time_point start = Clock::now();
  pid_ = fork();
  if (pid_ == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    std::vector<char*> argv;
    for (std::string& arg : argv_strings) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  output_fd_ = fds[0];
  const std::regex grpc_re("grpc listening on (\\S+)");
  const std::regex metrics_re("metrics listening on http://[^:]+:(\\d+)/");
  std::smatch grpc_match, metrics_match;
  while (SecondsSince(start) < timeout_seconds) {
    DrainOutput(5);
    if (std::regex_search(output_, grpc_match, grpc_re) &&
        std::regex_search(output_, metrics_match, metrics_re)) {
      break;
    }
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
  }
  if (grpc_match.empty()) return false;
  seconds_to_address_ = SecondsSince(start);
  address_ = grpc_match[1];
  metrics_port_ = std::stoi(metrics_match[1]);
  // Answering = a real RPC through the scheduler loop succeeds.
  std::shared_ptr<grpc::Channel> channel = NewChannel();
  auto admin = v1::Admin::NewStub(channel);
  while (SecondsSince(start) < timeout_seconds) {
    bool ready = false;
    if (ready_probe_) {
      ready = ready_probe_(channel);
    } else {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(1));
      Authorize(context);
      v1::GetConfigRequest request;
      v1::Config response;
      ready = admin->GetConfig(&context, request, &response).ok();
    }
    if (ready) {
      seconds_to_serving_ = SecondsSince(start);
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

void PhalanxdProcess::Authorize(grpc::ClientContext& context) const {
  if (!authorization_.empty()) {
    context.AddMetadata("authorization", authorization_);
  }
}

int PhalanxdProcess::Terminate() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const Clock::time_point start = Clock::now();
  int status = 0;
  while (SecondsSince(start) < 30) {
    DrainOutput(10);
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
  return -1;
}

int64_t PhalanxdProcess::RssBytes() const { return RssBytesOf(pid_); }

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
