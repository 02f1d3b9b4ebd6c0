// phalanxctl against a real daemon: output and exit codes.

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/auth_client.h"
#include "tests/daemon.h"
#include "tests/runtime_changes.h"

namespace phalanx::testing {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

using CtlResult = ShellResult;

// Runs phalanxctl with `args` (shell words) against `server` (no --server
// when empty); `env` goes before the command, e.g. "PHALANX_TOKEN=t". The
// user's client config file is left out (an empty one unless `env` sets
// PHALANX_CONFIG).
CtlResult Ctl(const std::string& server, const std::string& args,
              const std::string& env = "") {
  return RunShell(absl::StrCat(
      "PHALANX_CONFIG=/dev/null ", env, " ", PHALANXCTL_PATH,
      server.empty() ? "" : " --server " + server, " --timeout 5 ", args));
}

TEST(CtlTest, SubmitGetListAndErrorsThroughTheCli) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();

  CtlResult submit =
      Ctl(server, "submit --queue a --pods 2 --gpus 8 --level rack");
  EXPECT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("g-000001"));

  CtlResult get = Ctl(server, "-o json get g-000001");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, HasSubstr("GANG_STATE_ADMITTED"));

  CtlResult list = Ctl(server, "list --queue a");
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_THAT(list.output, HasSubstr("ADMITTED"));

  CtlResult missing = Ctl(server, "get g-999999");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output,
              HasSubstr("NOT_FOUND: gang_id: no gang \"g-999999\""));

  CtlResult unknown_queue =
      Ctl(server, "submit --queue nope --pods 1 --gpus 8");
  EXPECT_EQ(unknown_queue.exit_code, 1);
  EXPECT_THAT(unknown_queue.output,
              HasSubstr("NOT_FOUND: spec.queue: no queue \"nope\""));

  CtlResult never =
      Ctl(server, "submit --queue a --pods 3 --gpus 8 --level rack");
  EXPECT_EQ(never.exit_code, 1);
  EXPECT_THAT(never.output, HasSubstr("FAILED_PRECONDITION"));

  CtlResult usage = Ctl(server, "frobnicate");
  EXPECT_EQ(usage.exit_code, 2);

  daemon->Kill9();
  CtlResult down = Ctl(server, "list");
  EXPECT_EQ(down.exit_code, 3) << down.output;
}

TEST(CtlTest, CancelSeveralOrByLabelAndListFilters) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  const std::string team_x =
      daemon->WriteFile("x.json", R"({"queue": "a", "labels": {"team": "x"},
                    "podSets": [{"name": "w", "count": 1, "gpus": 1}]})");
  for (const std::string& args :
       {"submit -f " + team_x, "submit -f " + team_x,
        std::string("submit --queue a --pods 1 --gpus 1 --name y1"),
        std::string("submit --queue a --pods 1 --gpus 1 --name y2"),
        std::string("submit --queue a --pods 1 --gpus 1 --name y3")}) {
    ASSERT_EQ(Ctl(server, args).exit_code, 0) << args;
  }

  CtlResult team = Ctl(server, "list -l team=x --no-headers");
  EXPECT_EQ(team.exit_code, 0) << team.output;
  EXPECT_THAT(team.output, ContainsRegex("^g-000001 .*\ng-000002 [^\n]*\n$"));
  CtlResult others = Ctl(server, "list -l '!team,name!=y2'");
  EXPECT_THAT(others.output, ContainsRegex("^ID +QUEUE"));
  EXPECT_THAT(others.output, HasSubstr("g-000003"));
  EXPECT_THAT(others.output, Not(HasSubstr("g-000004")));
  EXPECT_THAT(others.output, Not(HasSubstr("g-000001")));
  CtlResult nobody = Ctl(server, "list --owner nobody");
  EXPECT_EQ(nobody.exit_code, 0);
  EXPECT_THAT(nobody.output, HasSubstr("No gangs found."));

  CtlResult by_label = Ctl(server, "cancel -l team=x --reason done");
  EXPECT_EQ(by_label.exit_code, 0) << by_label.output;
  EXPECT_THAT(by_label.output, ContainsRegex("g-000001 .* CANCELLED"));
  EXPECT_THAT(by_label.output, ContainsRegex("g-000002 .* CANCELLED"));
  CtlResult again = Ctl(server, "cancel -l team=x");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_THAT(again.output, HasSubstr("No unfinished gangs match."));

  // One missing id fails the command but not the others.
  CtlResult several = Ctl(server, "cancel g-000003 g-999999 g-000004");
  EXPECT_EQ(several.exit_code, 1) << several.output;
  EXPECT_THAT(several.output, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(several.output, ContainsRegex("g-000003 .* CANCELLED"));
  EXPECT_THAT(several.output, ContainsRegex("g-000004 .* CANCELLED"));
  CtlResult left = Ctl(server, "list --state pending,admitted --no-headers");
  EXPECT_THAT(left.output, ContainsRegex("^g-000005 [^\n]*\n$"));

  EXPECT_EQ(Ctl(server, "cancel").exit_code, 2);
  CtlResult both = Ctl(server, "cancel g-000005 -l team=x");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.output, HasSubstr("give gang IDs or -l SELECTOR, not both"));
}

TEST(CtlTest, BackupWritesACheckpointOnTheDaemonsMachine) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  ASSERT_EQ(Ctl(server, "submit --queue a --pods 1 --gpus 1").exit_code, 0);
  const std::string dir = daemon->data_dir() + "-backup";
  CtlResult backup = Ctl(server, "backup " + dir);
  EXPECT_EQ(backup.exit_code, 0) << backup.output;
  EXPECT_THAT(backup.output, HasSubstr("backup of revision "));
  EXPECT_THAT(backup.output, HasSubstr(" written to " + dir));
  EXPECT_TRUE(std::filesystem::exists(dir + "/CURRENT"));
  // Never over an existing backup.
  CtlResult again = Ctl(server, "backup " + dir);
  EXPECT_NE(again.exit_code, 0);
  EXPECT_THAT(again.output, HasSubstr("not empty"));
  std::filesystem::remove_all(dir);
}

TEST(CtlTest, HistoryExportWritesATraceCsvOrJsonLines) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  ASSERT_EQ(
      Ctl(server, "submit --queue a --pods 2 --gpus 8 --level rack").exit_code,
      0);
  ASSERT_EQ(Ctl(server, "submit --queue b --pods 8 --gpus 8").exit_code, 0);
  ASSERT_EQ(Ctl(server, "report g-000001 --state succeeded").exit_code, 0);
  // g-000002 takes the whole fleet once g-000001 ends: this one waits.
  ASSERT_EQ(Ctl(server, "submit --queue a --pods 1 --gpus 8").exit_code, 0);

  CtlResult csv = Ctl(server, "history export");
  ASSERT_EQ(csv.exit_code, 0) << csv.output;
  const std::vector<std::string> lines =
      absl::StrSplit(csv.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << csv.output;
  EXPECT_TRUE(absl::StartsWith(lines[0],
                               "timestamp,duration,num_gpus,cluster,priority,"
                               "checkpoint_interval_s,complete,gang_id,"));
  EXPECT_THAT(lines[1], ContainsRegex("^[0-9.]+,[0-9.]+,16,a,0,,1,g-000001,"
                                      "SUCCEEDED,2,8,,required:rack,"));
  EXPECT_THAT(lines[2], ContainsRegex("^[0-9.]+,[0-9.]*,64,b,0,,0,g-000002,"));
  EXPECT_THAT(
      lines[3],
      ContainsRegex("^[0-9.]+,,8,a,0,,0,g-000003,PENDING,1,8,,,,,0,0,"));

  CtlResult json = Ctl(server, "-o json history export --since 7d");
  ASSERT_EQ(json.exit_code, 0) << json.output;
  const std::vector<std::string> objects =
      absl::StrSplit(json.output, '\n', absl::SkipEmpty());
  ASSERT_EQ(objects.size(), 3u) << json.output;
  EXPECT_THAT(objects[0], HasSubstr("\"gang_id\":\"g-000001\""));

  CtlResult future = Ctl(server, "history export --since 2099-01-01T00:00:00Z");
  EXPECT_EQ(future.exit_code, 0) << future.output;
  EXPECT_EQ(std::count(future.output.begin(), future.output.end(), '\n'), 1);

  EXPECT_EQ(Ctl(server, "-o yaml history export").exit_code, 2);
  EXPECT_EQ(Ctl(server, "-o csv list").exit_code, 2);
  EXPECT_EQ(Ctl(server, "history export --since yesterday").exit_code, 2);
}

TEST(CtlTest, YamlWideAndAFutureRevision) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  ASSERT_EQ(Ctl(server, "submit --queue a --pods 2 --gpus 8").exit_code, 0);

  CtlResult yaml = Ctl(server, "-o yaml get g-000001");
  EXPECT_EQ(yaml.exit_code, 0) << yaml.output;
  EXPECT_THAT(yaml.output, HasSubstr("gang:\n  id: \"g-000001\"\n"));
  EXPECT_THAT(yaml.output, HasSubstr("  state: \"GANG_STATE_ADMITTED\"\n"));

  CtlResult wide = Ctl(server, "-o wide list");
  EXPECT_EQ(wide.exit_code, 0) << wide.output;
  EXPECT_THAT(wide.output,
              ContainsRegex("ATTEMPTS +NODES +CODE +START +REASON"));
  EXPECT_THAT(wide.output, ContainsRegex("node-[0-9]+,node-[0-9]+"));
  EXPECT_THAT(Ctl(server, "-o wide nodes list").output,
              ContainsRegex("USED/GPUS +CPU +MEMORY +STATE"));

  CtlResult future = Ctl(server, "watch --after-revision 999999");
  EXPECT_EQ(future.exit_code, 2) << future.output;
  EXPECT_THAT(future.output,
              HasSubstr("required revision is a future revision"));

  CtlResult bad = Ctl(server, "-o xml list");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("want table, json, yaml, wide or csv"));
}

TEST(CtlTest, ThePlanInListGetAndExplain) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  // The whole demo fleet, then a gang behind it.
  ASSERT_EQ(Ctl(server, "submit --queue a --pods 8 --gpus 8").exit_code, 0);
  ASSERT_EQ(Ctl(server, "submit --queue a --pods 1 --gpus 8").exit_code, 0);

  // The admitted gang has no place in the plan; the pending one is planned
  // or waits for the next plan (the first plan may not be made yet).
  CtlResult wide = Ctl(server, "-o wide list --no-headers");
  EXPECT_EQ(wide.exit_code, 0) << wide.output;
  // g-000001: ... NODES, CODE "-", START "-", no reason.
  EXPECT_THAT(wide.output, ContainsRegex("g-000001 [^\n]*node-[^ ]+ +- +-\n"));
  // g-000002: ... NODES "-", CODE, START (the format only: the plan's
  // accuracy is plan_test.cc's), then its reason.
  EXPECT_THAT(
      wide.output,
      ContainsRegex("g-000002 [^\n]* - +[A-Z_]+ +(-|now|in [0-9a-z]+) +[A-Z]"));
  const std::string plan_row =
      "Plan: +(planned, rank 1|not planned yet: it came after the last plan "
      "was made)\n";
  CtlResult get = Ctl(server, "get g-000002");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, ContainsRegex(plan_row));
  CtlResult explain = Ctl(server, "explain g-000002");
  EXPECT_EQ(explain.exit_code, 0) << explain.output;
  EXPECT_THAT(explain.output, ContainsRegex(plan_row));
  EXPECT_THAT(Ctl(server, "get g-000001").output, Not(HasSubstr("Plan:")));
  CtlResult json = Ctl(server, "-o json get g-000001");
  EXPECT_THAT(json.output, ContainsRegex("\"plan_status\": ?"
                                         "\"PLAN_STATUS_NOT_PENDING\""));
}

TEST(CtlTest, DrainWithADeadlineAndTheHorizonInTheConfig) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();

  CtlResult drain =
      Ctl(server, "nodes drain node-000 --deadline 2h --reason retire");
  EXPECT_EQ(drain.exit_code, 0) << drain.output;
  EXPECT_THAT(drain.output, HasSubstr("DRAINING (deadline in "));

  CtlResult bad = Ctl(server, "nodes drain node-000 --deadline soon");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.output, HasSubstr("--deadline: want a duration"));

  CtlResult config = Ctl(server, "config get");
  EXPECT_EQ(config.exit_code, 0) << config.output;
  EXPECT_THAT(config.output, HasSubstr("\"horizon\": \"3600s\""));
}

// Whether `text` holds a byte a terminal acts on: a C0 control other than
// newline, DEL, or a C1 control (raw, or encoded as UTF-8).
bool HasTerminalControl(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\n') || c == 0x7f) return true;
    if (c == 0xc2 && i + 1 < text.size()) {
      const unsigned char next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return true;
    }
  }
  return false;
}

// The longest line of `text`, in bytes.
size_t LongestLine(const std::string& text) {
  size_t longest = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    longest = std::max(longest, end - start);
    start = end + 1;
  }
  return longest;
}

TEST(CtlTest, ServerStringsReachTheTerminalEscaped) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  // A title change (OSC ... BEL), a C1 CSI and a bidi override.
  const std::string spec = daemon->WriteFile(
      "hostile.json",
      R"({"queue":"a","labels":{"name":"\u001b]0;pwned\u0007",)"
      R"("x":"\u009b2J\u202e"},"podSets":[{"name":"w","count":1,"gpus":8}]})");
  CtlResult submit = Ctl(server, "submit -f " + spec);
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_FALSE(HasTerminalControl(submit.output)) << submit.output;

  CtlResult get = Ctl(server, "get g-000001");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output,
              HasSubstr("name=\\x1b]0;pwned\\x07,x=\\u009b2J\\u202e"));
  EXPECT_FALSE(HasTerminalControl(get.output)) << get.output;
  EXPECT_THAT(get.output, Not(HasSubstr("\xe2\x80\xae")));

  CtlResult json = Ctl(server, "-o json get g-000001");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_THAT(json.output, HasSubstr(R"("name": "\u001b]0;pwned\u0007")"));
  EXPECT_FALSE(HasTerminalControl(json.output)) << json.output;

  for (const char* view : {"list", "explain g-000001"}) {
    CtlResult out = Ctl(server, view);
    EXPECT_EQ(out.exit_code, 0) << view << ": " << out.output;
    EXPECT_FALSE(HasTerminalControl(out.output)) << view << ": " << out.output;
  }

  // The server quotes client input in errors.
  CtlResult missing = Ctl(server, "get \"$(printf 'g-\\033[2J')\"");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_FALSE(HasTerminalControl(missing.output)) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("\"g-\\x1b[2J\""));
}

TEST(CtlTest, AHugeNodeLabelPrintsABoundedLine) {
  auto daemon = StartDemoDaemon();
  // The largest label values the limits allow.
  std::string config = DemoConfigJson();
  config.insert(config.size() - 1, R"(,"limits":{"maxLabelValueBytes":65536})");
  daemon->AddArgs({"--config=" + daemon->WriteFile("big_config.json", config)});
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  // 3 MiB if the daemon takes it, else the largest size it takes.
  size_t accepted = 0;
  for (size_t bytes : {size_t{3} << 20, size_t{200} << 10, size_t{16} << 10,
                       size_t{1} << 10}) {
    const std::string fleet = daemon->WriteFile(
        "big.json",
        absl::StrCat(R"({"nodes":[{"id":"node-big","gpuModel":"H100",)",
                     R"("gpuCount":8,"labels":{"block":"b0","rack":")",
                     std::string(bytes, 'r'), R"("}}]})"));
    CtlResult upsert = Ctl(server, "-o json nodes upsert -f " + fleet);
    if (upsert.exit_code == 0) {
      accepted = bytes;
      break;
    }
  }
  ASSERT_GT(accepted, 0u) << "the daemon took no label of 1 KiB or more";

  CtlResult list = Ctl(server, "nodes list");
  EXPECT_EQ(list.exit_code, 0) << list.output.substr(0, 2000);
  EXPECT_THAT(list.output, HasSubstr("node-big"));
  EXPECT_THAT(list.output, HasSubstr("rrr\xe2\x80\xa6"));
  EXPECT_LT(LongestLine(list.output), 512u) << "label of " << accepted;
  EXPECT_LT(list.output.size(), 10u * 512) << "label of " << accepted;

  // A gang label: the detail view cuts it with a note.
  const std::string spec = daemon->WriteFile(
      "big_spec.json",
      absl::StrCat(R"({"queue":"a","labels":{"note":")",
                   std::string(std::min(accepted, size_t{200} << 10), 'n'),
                   R"("},"podSets":[{"name":"w","count":1,"gpus":8}]})"));
  CtlResult submit = Ctl(server, "-o json submit -f " + spec);
  if (submit.exit_code == 0) {
    CtlResult get = Ctl(server, "get g-000001");
    EXPECT_EQ(get.exit_code, 0) << get.output.substr(0, 2000);
    EXPECT_THAT(get.output, HasSubstr("more bytes)"));
    EXPECT_LT(get.output.size(), 8192u);
  }
}

TEST(CtlTest, TokensAreSentButNeverShown) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  const std::string token = "tok-7c1e.secret";
  const std::string file = daemon->WriteFile("token", token + "\n");

  // This daemon runs without --auth (every caller is an admin): these only
  // show that a token on loopback does not break a call and is not printed.
  // CtlAuthTest checks tokens against a daemon that verifies them.
  const std::vector<CtlResult> runs = {
      Ctl(server, "--token " + token + " topology"),
      Ctl(server, "topology", "PHALANX_TOKEN=" + token),
      Ctl(server, "--token-file " + file + " nodes list"),
  };
  for (const CtlResult& run : runs) {
    EXPECT_EQ(run.exit_code, 0) << run.output;
    EXPECT_THAT(run.output, Not(HasSubstr(token)));
  }

  CtlResult far = Ctl(server, "--server 192.0.2.1:50051 topology",
                      "PHALANX_TOKEN=" + token);
  EXPECT_EQ(far.exit_code, 2) << far.output;
  EXPECT_THAT(far.output, HasSubstr("is not loopback"));
  EXPECT_THAT(far.output, Not(HasSubstr(token)));

  CtlResult help = Ctl(server, "--help", "PHALANX_TOKEN=" + token);
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.output, HasSubstr("--token TOKEN"));
  EXPECT_THAT(help.output, Not(HasSubstr(token)));
}

// The first line of `text` that holds every one of `parts`, or "".
std::string LineWith(const std::string& text,
                     const std::vector<std::string>& parts) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    bool all = true;
    for (const std::string& part : parts) {
      all = all && absl::StrContains(line, part);
    }
    if (all) return std::string(line);
  }
  return "";
}

constexpr char kAdminToken[] = "ctl-admin-token-0123456789";
constexpr char kTenantToken[] = "ctl-tenant-a-token-0123456789";

// Starts a demo daemon with --auth: "ops" (ADMIN) and "team-a" (TENANT of
// queue a), plus `extra_args`.
std::unique_ptr<DaemonProcess> StartAuthDaemon(
    std::vector<std::string> extra_args = {}) {
  auto daemon = StartDemoDaemon(std::move(extra_args));
  daemon->AddArgs(
      {"--auth=" +
       daemon->WriteFile(
           "auth.json",
           AuthJson({
               PrincipalJson("ops", kAdminToken, {"ROLE_ADMIN"}),
               PrincipalJson("team-a", kTenantToken, {"ROLE_TENANT"}, {"a"}),
           }))});
  return daemon;
}

TEST(CtlAuthTest, TheAuditShowsARefusalAndGetShowsTheOwner) {
  auto daemon = StartAuthDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  const std::string admin =
      "--token-file " + daemon->WriteFile("admin.token", kAdminToken);
  const std::string tenant =
      "--token-file " + daemon->WriteFile("tenant.token", kTenantToken);

  CtlResult submit =
      Ctl(server, tenant + " submit --queue a --pods 1 --gpus 8");
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  EXPECT_THAT(submit.output, ContainsRegex("g-000001 +a +team-a "));

  CtlResult refused = Ctl(server, tenant + " queues put --name a --weight 5");
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("PERMISSION_DENIED"));
  CtlResult tenant_audit = Ctl(server, tenant + " audit");
  EXPECT_EQ(tenant_audit.exit_code, 1) << tenant_audit.output;
  EXPECT_THAT(tenant_audit.output, HasSubstr("PERMISSION_DENIED"));
  CtlResult anonymous = Ctl(server, "audit");
  EXPECT_EQ(anonymous.exit_code, 1) << anonymous.output;
  EXPECT_THAT(anonymous.output, HasSubstr("UNAUTHENTICATED"));

  // Refusals reach the log with the next batch, about a cycle (0.2 s) later.
  std::string refusal;
  std::string anonymous_refusal;
  CtlResult audit;
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Milliseconds(100));
    audit = Ctl(server, admin + " audit --all --page-size 1");
    ASSERT_EQ(audit.exit_code, 0) << audit.output;
    refusal =
        LineWith(audit.output, {"team-a", "PutQueue", "PERMISSION_DENIED"});
    anonymous_refusal =
        LineWith(audit.output, {"ListAuditRecords", "UNAUTHENTICATED"});
    if (!refusal.empty() && !anonymous_refusal.empty()) break;
  }
  ASSERT_FALSE(refusal.empty()) << audit.output;
  EXPECT_THAT(refusal, ContainsRegex("^[0-9T:-]+Z +team-a +PutQueue +a +"
                                     "PERMISSION_DENIED"));
  EXPECT_THAT(anonymous_refusal,
              ContainsRegex("^[0-9T:-]+Z +- +ListAuditRecords +[^ ]+ +"
                            "UNAUTHENTICATED"));
  EXPECT_THAT(audit.output, HasSubstr("TIME "));
  EXPECT_THAT(audit.output, Not(HasSubstr("more records")));
  // --all followed the tokens: page size 1, yet every record (oldest first).
  EXPECT_LT(audit.output.find("PutQueue"), audit.output.find("UNAUTHENTICATED"))
      << audit.output;

  CtlResult first = Ctl(server, admin + " audit --page-size 1");
  EXPECT_EQ(first.exit_code, 0) << first.output;
  EXPECT_THAT(first.output,
              HasSubstr("(more records: --all, or --page-token "));

  CtlResult json = Ctl(server, admin + " -o json audit");
  EXPECT_EQ(json.exit_code, 0) << json.output;
  EXPECT_THAT(json.output,
              HasSubstr(R"("method": "/phalanx.v1.Admin/PutQueue")"));
  EXPECT_THAT(json.output, HasSubstr(R"("principal": "team-a")"));
  EXPECT_THAT(json.output, HasSubstr(R"("outcome": "PERMISSION_DENIED")"));

  CtlResult get = Ctl(server, admin + " get g-000001");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, ContainsRegex("Owner: +team-a\n"));
  CtlResult list = Ctl(server, tenant + " list");
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, ContainsRegex("ID +QUEUE +OWNER +STATE"));
  EXPECT_THAT(list.output, ContainsRegex("g-000001 +a +team-a +"));
  CtlResult mine = Ctl(server, admin + " list --owner team-a");
  EXPECT_THAT(mine.output, ContainsRegex("g-000001 +a +team-a +"));
  CtlResult theirs = Ctl(server, admin + " list --owner ops");
  EXPECT_EQ(theirs.exit_code, 0) << theirs.output;
  EXPECT_THAT(theirs.output, HasSubstr("No gangs found."));
  for (const CtlResult* run : {&submit, &refused, &audit, &json, &get}) {
    EXPECT_THAT(run->output, Not(HasSubstr(kAdminToken)));
    EXPECT_THAT(run->output, Not(HasSubstr(kTenantToken)));
  }
}

TEST(CtlAuthTest, TlsAndATokenAsInTheReadme) {
  auto daemon = StartAuthDaemon();
  const std::string token_file =
      daemon->WriteFile("admin.token", std::string(kAdminToken) + "\n");
  const std::string dir = token_file.substr(0, token_file.rfind('/'));
  TestPki pki(dir);
  pki.MakeCa("ca");
  pki.MakeCert("server", "phalanx.internal", "ca");
  daemon->AddArgs({"--tls-cert=" + pki.Path("server.crt"),
                   "--tls-key=" + pki.Path("server.key")});
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  const std::string tls = "--tls-ca " + pki.Path("ca.crt");

  CtlResult nodes =
      Ctl(server, tls + " --token-file " + token_file + " nodes list");
  EXPECT_EQ(nodes.exit_code, 0) << nodes.output;
  EXPECT_THAT(nodes.output, HasSubstr("node-000"));
  CtlResult audit =
      Ctl(server, tls + " audit", "PHALANX_TOKEN=" + std::string(kAdminToken));
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
  CtlResult no_token = Ctl(server, tls + " audit");
  EXPECT_EQ(no_token.exit_code, 1) << no_token.output;
  EXPECT_THAT(no_token.output, HasSubstr("UNAUTHENTICATED"));
  CtlResult plain = Ctl(server, "--token-file " + token_file + " nodes list");
  EXPECT_EQ(plain.exit_code, 3) << plain.output;
}

TEST(CtlAuthTest, AContextOfTheClientConfigReplacesTheConnectionFlags) {
  auto daemon = StartAuthDaemon();
  daemon->WriteFile("admin.token", std::string(kAdminToken) + "\n");
  const std::string tenant_token =
      daemon->WriteFile("tenant.token", kTenantToken);
  const std::string dir = tenant_token.substr(0, tenant_token.rfind('/'));
  TestPki pki(dir);
  pki.MakeCa("ca");
  pki.MakeCert("server", "phalanx.internal", "ca");
  daemon->AddArgs({"--tls-cert=" + pki.Path("server.crt"),
                   "--tls-key=" + pki.Path("server.key")});
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  // Relative paths are relative to the config file; the server is the
  // daemon's loopback address, checked as "localhost" (a name the
  // certificate holds).
  const std::string config = daemon->WriteFile(
      "phalanx-config", absl::StrCat(R"({"currentContext": "prod",
        "contexts": {
          "prod": {"server": ")",
                                     daemon->address(), R"(",
                   "tokenFile": "admin.token", "tlsCa": "ca.crt",
                   "tlsServerName": "localhost"},
          "plain": {"server": ")",
                                     daemon->address(), R"("}}})"));
  ASSERT_TRUE(std::filesystem::exists(dir + "/ca.crt"));
  const std::string env = "PHALANX_CONFIG=" + config;

  CtlResult audit = Ctl("", "audit", env);
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
  CtlResult named = Ctl("", "--context prod nodes list", env);
  EXPECT_EQ(named.exit_code, 0) << named.output;
  EXPECT_THAT(named.output, HasSubstr("node-000"));
  // A flag wins over the context: the tenant may not read the audit log.
  CtlResult tenant = Ctl("", "--token-file " + tenant_token + " audit", env);
  EXPECT_EQ(tenant.exit_code, 1) << tenant.output;
  EXPECT_THAT(tenant.output, HasSubstr("PERMISSION_DENIED"));
  CtlResult plain = Ctl("", "--context plain nodes list", env);
  EXPECT_EQ(plain.exit_code, 3) << plain.output;
  CtlResult unknown = Ctl("", "--context stage nodes list", env);
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("it has: plain, prod"));
  CtlResult missing = Ctl("", "nodes list", "PHALANX_CONFIG=" + dir + "/nope");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("cannot read client config"));
  for (const CtlResult* run : {&audit, &named, &tenant, &plain, &unknown}) {
    EXPECT_THAT(run->output, Not(HasSubstr(kAdminToken)));
    EXPECT_THAT(run->output, Not(HasSubstr(kTenantToken)));
  }
}

TEST(CtlTest, PriorityClassesAndTheQueuesMaxPriority) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  std::string config = DemoConfigJson();
  config.insert(config.rfind('}'),
                R"(,"priorityClasses":{"production":1000,"batch":0})");
  CtlResult set =
      Ctl(server, "config set -f " + daemon->WriteFile("classes.json", config));
  ASSERT_EQ(set.exit_code, 0) << set.output;
  CtlResult get_config = Ctl(server, "config get");
  EXPECT_EQ(get_config.exit_code, 0) << get_config.output;
  EXPECT_THAT(get_config.output, HasSubstr(R"("production": 1000)"));

  CtlResult submit = Ctl(server,
                         "submit --queue a --pods 1 --gpus 8 "
                         "--priority-class production");
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  CtlResult get = Ctl(server, "get g-000001");
  EXPECT_EQ(get.exit_code, 0) << get.output;
  EXPECT_THAT(get.output, ContainsRegex("Priority: +1000\n"));
  EXPECT_THAT(get.output, ContainsRegex("Priority class: +production\n"));
  EXPECT_THAT(get.output, Not(HasSubstr("Owner:")));  // no --auth

  CtlResult capped = Ctl(server, "queues put --name b --max-priority 5");
  EXPECT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_THAT(capped.output, ContainsRegex("MAX PRIO +HELD"));
  CtlResult uncapped = Ctl(server, "queues put --name a --weight 1");
  EXPECT_EQ(uncapped.exit_code, 0) << uncapped.output;
  CtlResult queues = Ctl(server, "queues list");
  EXPECT_EQ(queues.exit_code, 0) << queues.output;
  EXPECT_THAT(queues.output, ContainsRegex("\na +.* - +no\n"));
  EXPECT_THAT(queues.output, ContainsRegex("\nb +.* 5 +no\n"));
  CtlResult json = Ctl(server, "-o json queues list");
  EXPECT_THAT(json.output, HasSubstr(R"("max_priority": 5)"));

  CtlResult above = Ctl(server,
                        "submit --queue b --pods 1 --gpus 8 "
                        "--priority-class production");
  EXPECT_EQ(above.exit_code, 1) << above.output;
  EXPECT_THAT(above.output, HasSubstr("PERMISSION_DENIED"));
  CtlResult unknown = Ctl(server,
                          "submit --queue a --pods 1 --gpus 8 "
                          "--priority-class nope");
  EXPECT_EQ(unknown.exit_code, 1) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("priority_class"));
}

}  // namespace
}  // namespace phalanx::testing

namespace phalanx::testing {
namespace {

TEST(CtlTest, VersionQueuesSetAndNodeAddresses) {
  const ShellResult version = RunShell(PHALANXCTL_PATH " --version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.output, ::testing::StartsWith("phalanxctl 0."));

  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  CtlResult held = Ctl(server, "-o json queues set a --held");
  EXPECT_EQ(held.exit_code, 0) << held.output;
  EXPECT_THAT(held.output, HasSubstr("\"held\": true"));
  EXPECT_THAT(held.output, HasSubstr("\"weight\": 1"));  // untouched
  CtlResult weight = Ctl(server, "-o json queues set a --no-held --weight 4");
  EXPECT_EQ(weight.exit_code, 0) << weight.output;
  EXPECT_THAT(weight.output, HasSubstr("\"weight\": 4"));
  EXPECT_THAT(weight.output, ::testing::Not(HasSubstr("\"held\": true")));
  CtlResult nothing = Ctl(server, "queues set a");
  EXPECT_EQ(nothing.exit_code, 2) << nothing.output;
  CtlResult missing = Ctl(server, "queues set nope --held");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("NOT_FOUND"));

  CtlResult nodes = Ctl(server, "nodes list");
  EXPECT_EQ(nodes.exit_code, 0) << nodes.output;
  EXPECT_THAT(nodes.output, HasSubstr("ADDRESS"));
  // The demo fleet sets no address: the column says so, not the node id.
  EXPECT_THAT(nodes.output, ContainsRegex("\nnode-000 +- +H100"));
}

TEST(CtlTest, DiffShowsAndApplyMakesOnlyTheDeclaredChanges) {
  auto daemon = StartDemoDaemon();
  ASSERT_TRUE(daemon->Start()) << daemon->output();
  const std::string server = daemon->address();
  ASSERT_EQ(Ctl(server, "queues set a --held").exit_code, 0);
  ASSERT_EQ(Ctl(server, "nodes cordon node-000").exit_code, 0);
  // A directory of declarations, one file of each kind.
  const std::filesystem::path dir =
      std::filesystem::path(daemon->WriteFile("unused", "")).parent_path() /
      "declared";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "10-config.json")
      << R"({"topologyLevels":["block","rack"],"cycleInterval":"0.3s"})";
  std::ofstream(dir / "20-queues.json")
      << R"({"queues":[{"name":"a","weight":7},{"name":"c","weight":2}]})";
  std::ofstream(dir / "30-fleet.json")
      << R"({"nodes":[{"id":"node-000","address":"10.0.0.1"}]})";

  const CtlResult diff = Ctl(server, "diff -f " + dir.string());
  EXPECT_EQ(diff.exit_code, 0) << diff.output;
  EXPECT_THAT(diff.output, HasSubstr("~ config (version "));
  EXPECT_THAT(diff.output,
              HasSubstr("cycle_interval: \"0.200s\" -> \"0.300s\""));
  EXPECT_THAT(diff.output, HasSubstr("~ queue a\n    weight: 1 -> 7\n"));
  EXPECT_THAT(diff.output, HasSubstr("+ queue c\n    weight: 2\n"));
  EXPECT_THAT(diff.output,
              HasSubstr("~ node node-000\n    address: \"node-000\" -> "
                        "\"10.0.0.1\"\n"));
  EXPECT_EQ(ReadOperatorFields(*daemon).queue_a_weight,
            1);  // diff changes nothing

  // A stale version is refused before anything changes.
  const CtlResult stale =
      Ctl(server, "apply --expected-version 99 -f " + dir.string());
  EXPECT_EQ(stale.exit_code, 1) << stale.output;
  EXPECT_THAT(stale.output, HasSubstr("ABORTED: the config in force has"));
  EXPECT_EQ(ReadOperatorFields(*daemon).queue_a_weight, 1);

  const CtlResult apply = Ctl(server, "apply -f " + dir.string());
  EXPECT_EQ(apply.exit_code, 0) << apply.output;
  EXPECT_THAT(apply.output, HasSubstr("applied: 4 changed"));
  // What the files leave out stays: queue a held, node-000 cordoned.
  EXPECT_EQ(ReadOperatorFields(*daemon),
            (OperatorFields{7, true, 300, v1::NODE_STATE_CORDONED}));
  const CtlResult nodes = Ctl(server, "nodes list");
  EXPECT_THAT(nodes.output, HasSubstr("10.0.0.1"));
  const CtlResult again = Ctl(server, "diff -f " + dir.string());
  EXPECT_EQ(again.output, "no changes\n");
}

}  // namespace
}  // namespace phalanx::testing
