#include "tests/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"

namespace phalanx::testing {
namespace {

// How a ThreadSanitizer report begins.
constexpr std::string_view kTsanReport = "WARNING: ThreadSanitizer:";

}  // namespace

DaemonProcess::DaemonProcess(std::vector<std::string> extra_args)
    : extra_args_(std::move(extra_args)) {
  char pattern[] = "/tmp/phalanx-it-XXXXXX";
  root_ = mkdtemp(pattern);
  data_dir_ = root_ + "/data";
}

DaemonProcess::~DaemonProcess() {
  Kill9();
  std::filesystem::remove_all(root_);
}

std::string DaemonProcess::WriteFile(const std::string& name,
                                     const std::string& text) {
  const std::string path = root_ + "/" + name;
  std::ofstream(path) << text;
  return path;
}

DaemonProcess::CheckedStore DaemonProcess::CheckStore() {
  ChildProcess check;
  CheckedStore checked;
  if (!check.Start({.args = {std::string(PHALANXD_PATH), "--check-store",
                             "--data-dir=" + data_dir_},
                    .env = {},
                    .output_path = root_ + "/check-store.log",
                    .append_output = false})) {
    return checked;
  }
  check.WaitUntil([] { return false; }, absl::Seconds(30));
  if (check.Running()) {
    check.Kill9();
  } else {
    checked.exit_code = check.exit_code();
  }
  checked.output = check.Output();
  return checked;
}

bool DaemonProcess::Start() {
  std::vector<std::string> args = exec_prefix_;
  args.insert(args.end(),
              {std::string(PHALANXD_PATH), "--listen=" + listen_,
               "--metrics-listen=127.0.0.1:0", "--data-dir=" + data_dir_});
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());
  output_.clear();
  if (!process_.Start({.args = args,
                       .env = {},
                       .output_path = root_ + "/phalanxd.log",
                       .append_output = false})) {
    return false;
  }
  // Ready once both addresses are printed; at most 30 s.
  const std::regex grpc_re("grpc listening on (\\S+)");
  const std::regex metrics_re("metrics listening on http://[^:]+:(\\d+)/");
  std::smatch grpc_match, metrics_match;
  const bool ready = process_.WaitUntil(
      [&] {
        ReadOutput(0);
        return std::regex_search(output_, grpc_match, grpc_re) &&
               std::regex_search(output_, metrics_match, metrics_re);
      },
      absl::Seconds(30));
  if (!ready) {
    Kill9();
    return false;
  }
  address_ = grpc_match[1];
  metrics_port_ = std::stoi(metrics_match[1]);
  channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  return true;
}

void DaemonProcess::Kill9() {
  process_.Kill9();
  ReadOutput(0);
}

void DaemonProcess::Signal(int signal) { process_.Signal(signal); }

void DaemonProcess::Pause() { process_.Pause(); }

void DaemonProcess::ReadOutput(int wait_ms) {
  if (process_.output_path().empty()) return;
  const absl::Time deadline = absl::Now() + absl::Milliseconds(wait_ms);
  std::string text = process_.ReadNewOutput();
  while (text.empty() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    text = process_.ReadNewOutput();
  }
  // The marker may straddle two reads: look again at its length's worth of
  // what was already checked.
  const size_t from =
      output_.size() - std::min(output_.size(), kTsanReport.size() - 1);
  output_ += text;
  ExpectNoTsanReport(absl::StrCat("phalanxd (", root_, "/phalanxd.log)"),
                     std::string_view(output_).substr(from));
}

int DaemonProcess::Terminate() {
  const int code = process_.Stop(absl::Seconds(30));
  ReadOutput(0);
  return code;
}

int DaemonProcess::WaitForExit(absl::Duration timeout) {
  process_.WaitUntil([] { return false; }, timeout);
  if (process_.Running()) return -1;
  ReadOutput(0);
  return process_.exit_code();
}

std::unique_ptr<v1::Scheduler::Stub> DaemonProcess::Scheduler() const {
  return v1::Scheduler::NewStub(channel_);
}
std::unique_ptr<v1::Fleet::Stub> DaemonProcess::Fleet() const {
  return v1::Fleet::NewStub(channel_);
}
std::unique_ptr<v1::Admin::Stub> DaemonProcess::Admin() const {
  return v1::Admin::NewStub(channel_);
}

std::string DemoFleetJson() {
  std::string nodes;
  for (int b = 0; b < 2; ++b) {
    for (int r = 0; r < 2; ++r) {
      for (int n = 0; n < 2; ++n) {
        if (!nodes.empty()) nodes += ",";
        nodes += absl::StrFormat(
            R"({"id":"node-%d%d%d","gpuModel":"H100","gpuCount":8,)"
            R"("labels":{"block":"b%d","rack":"b%d-r%d"}})",
            b, r, n, b, b, r);
      }
    }
  }
  return absl::StrCat(R"({"nodes":[)", nodes, "]}");
}

std::string DemoQueuesJson() {
  return R"({"queues":[{"name":"a","weight":1},{"name":"b","weight":1}]})";
}

std::string DemoConfigJson() {
  return R"({"topologyLevels":["block","rack"],"cycleInterval":"0.2s",)"
         R"("retention":{"events":"50"},"watch":{"bookmarkInterval":"0.5s"}})";
}

std::unique_ptr<DaemonProcess> StartDemoDaemon(
    std::vector<std::string> extra_args) {
  auto daemon = std::make_unique<DaemonProcess>();
  daemon->AddArgs(
      {"--config=" + daemon->WriteFile("config.json", DemoConfigJson()),
       "--fleet=" + daemon->WriteFile("fleet.json", DemoFleetJson()),
       "--queues=" + daemon->WriteFile("queues.json", DemoQueuesJson())});
  daemon->AddArgs(extra_args);
  return daemon;
}

v1::SubmitGangRequest SubmitRequest(const std::string& queue, int count,
                                    int gpus, const std::string& level,
                                    const std::string& request_id) {
  v1::SubmitGangRequest request;
  request.mutable_spec()->set_queue(queue);
  request.mutable_spec()->set_request_id(request_id);
  v1::PodSet* set = request.mutable_spec()->add_pod_sets();
  set->set_name("workers");
  set->set_count(count);
  set->set_gpus(gpus);
  if (!level.empty()) {
    set->mutable_topology()->set_mode(v1::TOPOLOGY_MODE_REQUIRED);
    set->mutable_topology()->set_level(level);
  }
  return request;
}

v1::Gang SubmitOk(v1::Scheduler::Stub& stub,
                  const v1::SubmitGangRequest& request) {
  grpc::ClientContext context;
  v1::SubmitGangResponse response;
  grpc::Status status = stub.SubmitGang(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.gang();
}

v1::Gang GetOk(v1::Scheduler::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  v1::GetGangRequest request;
  request.set_gang_id(id);
  v1::GetGangResponse response;
  grpc::Status status = stub.GetGang(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.gang();
}

v1::GangEvent WaitForEvent(v1::Scheduler::Stub& stub, v1::EventType type,
                           int64_t after, std::chrono::seconds timeout) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::WatchGangsRequest request;
  request.set_after_revision(after);
  auto reader = stub.WatchGangs(&context, request);
  v1::GangEvent event;
  while (reader->Read(&event)) {
    if (event.type() == type) {
      context.TryCancel();
      return event;
    }
  }
  return v1::GangEvent();
}

std::vector<std::string> GpuHoldingProblems(v1::Scheduler::Stub& scheduler,
                                            v1::Fleet::Stub& fleet) {
  std::vector<std::string> problems;
  std::map<std::pair<std::string, int>, std::string> holder;
  v1::ListGangsRequest list;
  list.set_page_size(1000);
  for (int page_count = 0; page_count < 10000; ++page_count) {
    grpc::ClientContext context;
    v1::ListGangsResponse page;
    if (!scheduler.ListGangs(&context, list, &page).ok()) {
      ADD_FAILURE() << "ListGangs failed";
      return problems;
    }
    for (const v1::Gang& gang : page.gangs()) {
      if (gang.placement_released()) continue;  // a final gang's last one
      for (const v1::PodPlacement& pod : gang.placement()) {
        for (int gpu : pod.gpu_indices()) {
          auto [it, fresh] =
              holder.emplace(std::pair(pod.node(), gpu), gang.id());
          if (!fresh) {
            problems.push_back(absl::StrCat(pod.node(), "/", gpu, " held by ",
                                            it->second, " and ", gang.id()));
          }
        }
      }
    }
    list.set_page_token(page.next_page_token());
    if (list.page_token().empty()) break;
  }
  grpc::ClientContext context;
  v1::ListNodesResponse nodes;
  if (!fleet.ListNodes(&context, {}, &nodes).ok()) {
    ADD_FAILURE() << "ListNodes failed";
    return problems;
  }
  size_t used = 0;
  for (const v1::Node& node : nodes.nodes()) {
    for (int gpu : node.used_gpu_indices()) {
      if (!holder.contains({node.id(), gpu})) {
        problems.push_back(
            absl::StrCat(node.id(), "/", gpu, " used but held by no gang"));
      }
      ++used;
    }
  }
  if (used != holder.size()) {
    problems.push_back(absl::StrCat(used, " GPUs used by nodes, ",
                                    holder.size(), " held by gangs"));
  }
  return problems;
}

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: localhost\r\n\r\n");
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buffer[8192];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) response.append(buffer, n);
  close(fd);
  return response;
}

void ExpectNoTsanReport(const std::string& program, std::string_view output) {
  const size_t report = output.find(kTsanReport);
  if (report != std::string_view::npos) {
    ADD_FAILURE() << program << ":\n" << output.substr(report, 8000);
  }
}

ShellResult RunShell(const std::string& command) {
  ShellResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.output.append(buffer, n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ExpectNoTsanReport(command, result.output);
  return result;
}

}  // namespace phalanx::testing
