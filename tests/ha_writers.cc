#include "tests/ha_writers.h"

#include <signal.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/store_check.h"

namespace phalanx::testing {

bool Eventually(const std::function<bool()>& condition, int tries) {
  for (int i = 0; i < tries; ++i) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return condition();
}

v1::ListGangsResponse ListAll(v1::Scheduler::Stub& stub) {
  v1::ListGangsRequest request;
  request.set_page_size(1000);
  v1::ListGangsResponse response;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  grpc::Status status = stub.ListGangs(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

void StopAndCheckStores(const std::vector<DaemonProcess*>& replicas) {
  for (DaemonProcess* replica : replicas) {
    if (replica == nullptr) continue;
    if (replica->pid() > 0) {
      replica->Signal(SIGCONT);
      replica->Terminate();
    }
    const absl::Status consistent =
        storage::CheckStoreConsistency(replica->data_dir());
    EXPECT_TRUE(consistent.ok())
        << replica->data_dir() << ": " << consistent << "\n"
        << replica->output();
  }
}

v1::Gang WithoutPlan(v1::Gang gang) {
  gang.clear_plan_status();
  gang.clear_estimated_start();
  gang.clear_planned_domain();
  gang.clear_plan_rank();
  return gang;
}

v1::ListGangsResponse WithoutPlans(v1::ListGangsResponse listed) {
  for (v1::Gang& gang : *listed.mutable_gangs()) gang = WithoutPlan(gang);
  return listed;
}

int CheckNoGpuTwice(const v1::ListGangsResponse& listed) {
  std::set<std::pair<std::string, int>> held;
  int count = 0;
  for (const v1::Gang& gang : listed.gangs()) {
    if (gang.state() == v1::GANG_STATE_CANCELLED ||
        gang.state() == v1::GANG_STATE_SUCCEEDED ||
        gang.state() == v1::GANG_STATE_FAILED) {
      continue;
    }
    for (const v1::PodPlacement& pod : gang.placement()) {
      for (int gpu : pod.gpu_indices()) {
        EXPECT_TRUE(held.insert({pod.node(), gpu}).second)
            << pod.node() << " GPU " << gpu << " held twice";
        ++count;
      }
    }
  }
  return count;
}

Writers::Writers(std::vector<DaemonProcess*> replicas, int per_writer,
                 bool stop_on_error, absl::Duration pause)
    : replicas_(std::move(replicas)),
      per_writer_(per_writer),
      stop_on_error_(stop_on_error),
      pause_(pause) {}

Writers::~Writers() { Join(); }

void Writers::Start() {
  for (int w = 0; w < 2; ++w) threads_.emplace_back([this, w] { Run(w); });
}

void Writers::Join() {
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void Writers::Check(const v1::ListGangsResponse& listed) const {
  std::map<std::string, const v1::Gang*> by_id;
  std::map<std::string, int> request_ids;
  for (const v1::Gang& gang : listed.gangs()) {
    by_id[gang.id()] = &gang;
    ++request_ids[gang.spec().request_id()];
  }
  for (const auto& [request_id, count] : request_ids) {
    EXPECT_EQ(count, 1) << request_id << " is there twice";
  }
  for (const auto& [request_id, id] : submitted_) {
    auto found = by_id.find(id);
    if (found == by_id.end()) {
      ADD_FAILURE() << request_id << " (" << id << ") was lost";
      continue;
    }
    EXPECT_EQ(found->second->spec().request_id(), request_id);
  }
  for (const std::string& id : cancelled_) {
    auto found = by_id.find(id);
    EXPECT_TRUE(found != by_id.end() &&
                found->second->state() == v1::GANG_STATE_CANCELLED)
        << id << " was cancelled";
  }
  CheckNoGpuTwice(listed);
}

void Writers::CheckErrorsAreRetryable() const {
  for (const auto& [code, message] : errors_) {
    EXPECT_TRUE(code == grpc::StatusCode::UNAVAILABLE ||
                code == grpc::StatusCode::DEADLINE_EXCEEDED)
        << code << " " << message;
  }
}

absl::Duration Writers::LongestGap(absl::Time from) const {
  std::vector<absl::Time> times = acked_at_;
  times.push_back(from);
  std::sort(times.begin(), times.end());
  absl::Duration longest;
  for (size_t i = 1; i < times.size(); ++i) {
    if (times[i - 1] >= from) {
      longest = std::max(longest, times[i] - times[i - 1]);
    }
  }
  return longest;
}

grpc::Status Writers::Send(
    size_t& replica,
    const std::function<grpc::Status(v1::Scheduler::Stub&,
                                     grpc::ClientContext&)>& call) {
  auto stub = replicas_[replica]->Scheduler();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
  grpc::Status status = call(*stub, context);
  if (!status.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.emplace_back(status.error_code(), status.error_message());
    replica = (replica + 1) % replicas_.size();
  }
  return status;
}

void Writers::Acknowledged(const std::function<void()>& record) {
  std::lock_guard<std::mutex> lock(mu_);
  record();
  acked_at_.push_back(absl::Now());
  ++acknowledged_;
}

void Writers::Run(int writer) {
  size_t replica = 0;
  for (int i = 0; i < per_writer_; ++i) {
    const std::string request_id = absl::StrCat("w", writer, "-", i);
    v1::SubmitGangResponse response;
    const grpc::Status submitted =
        Send(replica, [&](v1::Scheduler::Stub& stub, grpc::ClientContext& c) {
          return stub.SubmitGang(&c, SubmitRequest("a", 1, 1, "", request_id),
                                 &response);
        });
    if (!submitted.ok()) {
      if (stop_on_error_) return;
      absl::SleepFor(absl::Milliseconds(50));
      continue;
    }
    Acknowledged([&] { submitted_[request_id] = response.gang().id(); });
    absl::SleepFor(pause_);
    if (i % 2 == 1) continue;
    v1::CancelGangRequest cancel;
    cancel.set_gang_id(response.gang().id());
    v1::CancelGangResponse cancelled;
    if (!Send(replica, [&](v1::Scheduler::Stub& stub, grpc::ClientContext& c) {
           return stub.CancelGang(&c, cancel, &cancelled);
         }).ok()) {
      if (stop_on_error_) return;
      continue;
    }
    Acknowledged([&] { cancelled_.insert(response.gang().id()); });
  }
}

}  // namespace phalanx::testing
