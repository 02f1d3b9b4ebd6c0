// `audit` as RunCommand runs it, against a real gRPC server in this process
// whose Admin service answers ListAuditRecords from a script: how paging
// follows, and stops on, the tokens a server hands out.
#include "clients/ctl_commands.h"

#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "clients/ctl_args.h"
#include "clients/ctl_format.h"
#include "clients/ctl_requests.h"
#include "clients/ctl_test_support.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "phalanx/v1/admin.grpc.pb.h"

namespace phalanx::ctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using Script = std::function<v1::ListAuditRecordsResponse(
    const v1::ListAuditRecordsRequest&)>;

// Answers ListAuditRecords with `script` and records every request.
class ScriptedAdmin final : public v1::Admin::Service {
 public:
  explicit ScriptedAdmin(Script script) : script_(std::move(script)) {}

  grpc::Status ListAuditRecords(
      grpc::ServerContext* /*context*/,
      const v1::ListAuditRecordsRequest* request,
      v1::ListAuditRecordsResponse* response) override {
    std::lock_guard<std::mutex> lock(mu_);
    requests_.push_back(*request);
    *response = script_(*request);
    return grpc::Status::OK;
  }

  std::vector<v1::ListAuditRecordsRequest> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }

 private:
  const Script script_;
  std::mutex mu_;
  std::vector<v1::ListAuditRecordsRequest> requests_;
};

// A plain-text server answering ListAuditRecords from a script.
class AdminServer : public LoopbackServer<ScriptedAdmin> {
 public:
  explicit AdminServer(Script script)
      : LoopbackServer(grpc::InsecureServerCredentials(), std::move(script)) {}
  ScriptedAdmin& admin() { return service(); }
};

CtlRun RunAudit(const AdminServer& server, std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"--server", server.address()});
  CtlRun run = RunCtl(argv);
  EXPECT_NE(run.exit_code, kExitUsage) << run.err;
  return run;
}

v1::AuditRecord Record(int64_t sequence, const std::string& principal) {
  v1::AuditRecord record;
  record.set_sequence(sequence);
  record.set_principal(principal);
  record.set_method("/phalanx.v1.Admin/PutQueue");
  record.set_target("a");
  record.set_outcome("PERMISSION_DENIED");
  record.set_summary(absl::StrCat("record ", sequence));
  return record;
}

// A log of `total` records, served as the daemon does: `page_size` per page
// (0 = 100), the token being the last sequence of the page.
Script Log(int64_t total, int64_t dropped = 0) {
  return [total, dropped](const v1::ListAuditRecordsRequest& request) {
    int64_t after = 0;
    if (!request.page_token().empty()) {
      EXPECT_TRUE(absl::SimpleAtoi(request.page_token(), &after));
    }
    const int64_t size = request.page_size() == 0 ? 100 : request.page_size();
    v1::ListAuditRecordsResponse page;
    for (int64_t s = after + 1; s <= total && s <= after + size; ++s) {
      *page.add_records() = Record(s, absl::StrCat("p", s));
    }
    if (after + size < total) {
      page.set_next_page_token(absl::StrCat(after + size));
    }
    page.set_dropped(dropped);
    return page;
  };
}

TEST(AuditCommandTest, OnePageAndTheTokenThatContinuesIt) {
  AdminServer server(Log(5));
  CtlRun run = RunAudit(server, {"audit", "--page-size", "2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.out, HasSubstr("p1 "));
  EXPECT_THAT(run.out, HasSubstr("p2 "));
  EXPECT_THAT(run.out, Not(HasSubstr("p3 ")));
  EXPECT_THAT(run.err, HasSubstr("(more records: --all, or --page-token 2)"));
  ASSERT_EQ(server.admin().requests().size(), 1u);
  EXPECT_EQ(server.admin().requests()[0].page_size(), 2);

  CtlRun next =
      RunAudit(server, {"audit", "--page-size", "2", "--page-token", "2"});
  EXPECT_EQ(next.exit_code, kExitOk) << next.err;
  EXPECT_THAT(next.out, HasSubstr("p3 "));
  EXPECT_THAT(next.out, Not(HasSubstr("p1 ")));
}

TEST(AuditCommandTest, AllFollowsTheTokensOldestFirst) {
  AdminServer server(Log(5, /*dropped=*/3));
  CtlRun run = RunAudit(server, {"audit", "--all", "--page-size", "2"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_EQ(run.err, "");
  std::vector<size_t> at;
  for (int s = 1; s <= 5; ++s) at.push_back(run.out.find(absl::StrCat("p", s)));
  for (size_t i = 1; i < at.size(); ++i) {
    EXPECT_LT(at[i - 1], at[i]) << run.out;
  }
  EXPECT_NE(at.back(), std::string::npos) << run.out;
  EXPECT_THAT(run.out, ::testing::EndsWith("\ndropped: 3 (records over the "
                                           "per-principal audit rate)\n"));
  std::vector<std::string> tokens;
  for (const auto& request : server.admin().requests()) {
    tokens.push_back(request.page_token());
  }
  EXPECT_THAT(tokens, ElementsAre("", "2", "4"));

  CtlRun json = RunAudit(server, {"-o", "json", "audit", "--all"});
  EXPECT_EQ(json.exit_code, kExitOk) << json.err;
  EXPECT_THAT(json.out, HasSubstr(R"("sequence": "5")"));
  EXPECT_THAT(json.out, HasSubstr(R"("dropped": "3")"));
  EXPECT_THAT(json.out, HasSubstr(R"("next_page_token": "")"));
  // --all asks for full pages unless told otherwise.
  EXPECT_EQ(server.admin().requests().back().page_size(), kMaxAuditPageSize);
}

TEST(AuditCommandTest, AllStopsOnARepeatedToken) {
  AdminServer server([](const v1::ListAuditRecordsRequest&) {
    v1::ListAuditRecordsResponse page;
    *page.add_records() = Record(1, "same");
    page.set_next_page_token("7");
    return page;
  });
  CtlRun run = RunAudit(server, {"audit", "--all"});
  EXPECT_EQ(run.exit_code, kExitRpcError);
  EXPECT_THAT(run.err, HasSubstr("repeated a page token"));
  EXPECT_THAT(run.out, HasSubstr("same"));  // what came is printed
  EXPECT_EQ(server.admin().requests().size(), 2u);
}

TEST(AuditCommandTest, AllStopsOnAnEmptyPageWithAToken) {
  AdminServer server([](const v1::ListAuditRecordsRequest& request) {
    v1::ListAuditRecordsResponse page;
    page.set_next_page_token(request.page_token() + "x");
    return page;
  });
  CtlRun run = RunAudit(server, {"audit", "--all"});
  EXPECT_EQ(run.exit_code, kExitRpcError);
  EXPECT_THAT(run.err, HasSubstr("No audit records."));
  EXPECT_EQ(server.admin().requests().size(), 1u);
}

TEST(AuditCommandTest, AllStopsAtThePageLimit) {
  // A server that hands out a new token with every page (up to twice the
  // client's bound, so that a client without one still ends).
  AdminServer server([](const v1::ListAuditRecordsRequest& request) {
    int64_t after = 0;
    if (!request.page_token().empty()) {
      EXPECT_TRUE(absl::SimpleAtoi(request.page_token(), &after));
    }
    v1::ListAuditRecordsResponse page;
    *page.add_records() = Record(after + 1, "p");
    if (after + 1 < 2 * kMaxAuditPages) {
      page.set_next_page_token(absl::StrCat(after + 1));
    }
    return page;
  });
  CtlRun run = RunAudit(server, {"audit", "--all"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  EXPECT_THAT(run.err, HasSubstr(absl::StrCat(
                           "stopped after ", kMaxAuditPages,
                           " pages; more records remain (--page-token ",
                           kMaxAuditPages, ")")));
  EXPECT_EQ(server.admin().requests().size(),
            static_cast<size_t>(kMaxAuditPages));
}

TEST(AuditCommandTest, HostileRecordsPrintEscaped) {
  const std::string hostile =
      "\x1b]0;pwned\x07|\xc2\x9b"
      "2J|\xe2\x80\xae|\r";
  AdminServer server([hostile](const v1::ListAuditRecordsRequest&) {
    v1::ListAuditRecordsResponse page;
    v1::AuditRecord* record = page.add_records();
    record->set_principal(hostile);
    record->set_method(hostile);
    record->set_target(hostile);
    record->set_outcome(hostile);
    record->set_summary(hostile);
    page.set_next_page_token(hostile);
    return page;
  });
  CtlRun run = RunAudit(server, {"audit"});
  EXPECT_EQ(run.exit_code, kExitOk) << run.err;
  for (const std::string* text : {&run.out, &run.err}) {
    EXPECT_THAT(*text, Not(HasSubstr("\x1b")));
    EXPECT_THAT(*text, Not(HasSubstr("\x07")));
    EXPECT_THAT(*text, Not(HasSubstr("\r")));
    EXPECT_THAT(*text, Not(HasSubstr("\xc2\x9b")));
    EXPECT_THAT(*text, Not(HasSubstr("\xe2\x80\xae")));
  }
  EXPECT_THAT(run.out, HasSubstr("\\x1b]0;pwned\\x07|\\u009b2J|\\u202e|\\r"));
  EXPECT_THAT(run.err, HasSubstr("--page-token \\x1b]0;pwned"));
}

}  // namespace
}  // namespace phalanx::ctl
