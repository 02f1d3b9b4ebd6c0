#!/usr/bin/python3
"""Checks the operator files of deploy/ against the daemon's source.

Every PromQL expression of the Grafana dashboard and of the alerting rules may
use only the series that server/metrics.cc declares (read from the source, not
from a list kept here), with their real label names and, where the source
spells them out, their real label values; the systemd units may pass phalanxd
only flags that server/daemon_options.cc defines, every variable they use is
set by their env files, and every file they name is one the package installs
or phalanx-bootstrap writes. Standard library only.

Usage: deploy_files_test.py PROJECT_SOURCE_DIR
"""

import json
import os
import re
import sys
import unittest

ROOT = None  # set from argv in __main__

# Series that Prometheus adds for every target, with the target labels.
BUILTIN_SERIES = {"up": set()}
TARGET_LABELS = {"job", "instance"}

# PromQL functions and aggregation operators (Prometheus 2.x).
PROMQL_FUNCTIONS = {
    "abs", "absent", "absent_over_time", "avg_over_time", "ceil", "changes",
    "clamp", "clamp_max", "clamp_min", "count_over_time", "day_of_month",
    "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta",
    "increase", "irate", "label_join", "label_replace", "last_over_time",
    "ln", "log10", "log2", "max_over_time", "min_over_time", "minute",
    "month", "predict_linear", "present_over_time", "quantile_over_time",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt",
    "stddev_over_time", "stdvar_over_time", "sum_over_time", "time",
    "timestamp", "vector", "year", "sum", "min", "max", "avg", "group",
    "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
    "quantile",
}
GROUPING_KEYWORDS = {"by", "without", "on", "ignoring", "group_left",
                     "group_right"}
OTHER_KEYWORDS = {"bool", "and", "or", "unless", "offset", "inf", "nan"}


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


# --------------------------------------------------------------------------
# What the daemon exports, read from server/metrics.cc.
# --------------------------------------------------------------------------

def _call_args(text, start):
    """Returns the text between the '(' at `start` and its matching ')'."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    raise ValueError("unbalanced parenthesis in metrics.cc")


def _enum_names(model_cc, function):
    """The strings core/model.cc's `function` can return."""
    match = re.search(r"const char\* %s\(.*?\n}\n" % function, model_cc, re.S)
    if not match:
        return None
    return set(re.findall(r'"([A-Z_]+)"', match.group(0)))


def declared_series(metrics_cc, model_cc):
    """Maps each exposed series name to {label: allowed values or None}.

    prometheus-cpp 1.0 writes a counter's or gauge's name exactly as declared
    (it appends no `_total`: the declared counters already end in it) and a
    histogram as NAME_bucket (with `le`), NAME_sum and NAME_count.
    """
    families = {}  # member_ -> (kind, name)
    for member, kind, name in re.findall(
            r"(\w+_)\(\s*Build(Counter|Gauge|Histogram|Summary)\(\)\s*"
            r'\.Name\("([a-zA-Z_:][a-zA-Z0-9_:]*)"\)', metrics_cc):
        families[member] = (kind, name)
    value_sources = {
        "GangStateName": _enum_names(model_cc, "GangStateName"),
        "EventTypeName": set(re.findall(
            r'"([A-Z_]+)"', re.search(r"EventTypeName\(EventType type\) {(.*?)}",
                                      model_cc, re.S).group(1))),
        "CodeName": set(re.findall(
            r'"([A-Z_]+)"', re.search(r"kNames\[\] = {(.*?)}",
                                      metrics_cc, re.S).group(1))),
    }
    series = {}
    for member, (kind, name) in families.items():
        labels = {}
        for match in re.finditer(r"\b%s\s*\.Add\(" % re.escape(member),
                                 metrics_cc):
            args = _call_args(metrics_cc, match.end() - 1)
            for label, value in re.findall(r'{\s*"(\w+)"\s*,\s*([^{}]+?)\s*}',
                                           args):
                allowed = labels.setdefault(label, set())
                if allowed is None:
                    continue
                literal = re.fullmatch(r'"([^"]*)"', value)
                source = next((s for s in value_sources if s in value), None)
                if literal:
                    allowed.add(literal.group(1))
                elif source and value_sources[source]:
                    allowed |= value_sources[source]
                else:
                    labels[label] = None  # computed: any value
        if kind == "Histogram":
            series[name + "_bucket"] = dict(labels, le=None)
            series[name + "_sum"] = dict(labels)
            series[name + "_count"] = dict(labels)
        elif kind == "Summary":
            series[name] = dict(labels, quantile=None)
            series[name + "_sum"] = dict(labels)
            series[name + "_count"] = dict(labels)
        else:
            series[name] = labels
    for name, labels in BUILTIN_SERIES.items():
        series[name] = {label: None for label in labels}
    return series


# --------------------------------------------------------------------------
# A small PromQL reader: enough to find every selector, matcher and grouping.
# --------------------------------------------------------------------------

TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<range>\[[^\]]*\])
  | (?P<var>\$\{?\w+\}?)
  | (?P<num>0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?(?:ms|[smhdwy])*|\.\d+)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=@])
  | (?P<punct>[{}(),])
""", re.X)


def tokenize(expr):
    tokens, pos = [], 0
    while pos < len(expr):
        match = TOKEN.match(expr, pos)
        if not match:
            raise ValueError("cannot read %r at %r" % (expr, expr[pos:pos + 20]))
        pos = match.end()
        kind = match.lastgroup
        if kind != "space":
            tokens.append((kind, match.group(kind)))
    return tokens


def analyze(expr):
    """Returns (selectors, groupings, problems) of one PromQL expression.

    selectors: [(metric, [(label, op, value)])]; groupings: label names of
    by/without/on/ignoring/group_left/group_right.
    """
    tokens = tokenize(expr)
    selectors, groupings, problems = [], [], []

    def matchers(i):  # tokens[i] is '{'; returns (matchers, index after '}')
        found, i = [], i + 1
        while tokens[i] != ("punct", "}"):
            if tokens[i] == ("punct", ","):
                i += 1
                continue
            (k1, label), (k2, op), (k3, value) = tokens[i:i + 3]
            if k1 != "ident" or k2 != "op" or k3 != "str":
                raise ValueError("bad matcher in %r" % expr)
            found.append((label, op, value[1:-1]))
            i += 3
        return found, i + 1

    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        after = tokens[i + 1] if i + 1 < len(tokens) else (None, None)
        if kind == "ident" and text in GROUPING_KEYWORDS:
            if after == ("punct", "("):
                j = i + 2
                while tokens[j] != ("punct", ")"):
                    if tokens[j][0] == "ident":
                        groupings.append(tokens[j][1])
                    j += 1
                i = j + 1
            else:
                i += 1
            continue
        if kind == "ident" and after == ("punct", "("):
            if text not in PROMQL_FUNCTIONS:
                problems.append("unknown function %s() in %r" % (text, expr))
            i += 1
            continue
        if (kind == "ident" and text in PROMQL_FUNCTIONS and
                after in (("ident", "by"), ("ident", "without"))):
            i += 1  # an aggregation written `sum by (x) (...)`
            continue
        if kind == "ident" and text.lower() in OTHER_KEYWORDS:
            i += 1
            continue
        if kind == "ident":
            if after == ("punct", "{"):
                found, i = matchers(i + 1)
            else:
                found, i = [], i + 1
            selectors.append((text, found))
            continue
        if (kind, text) == ("punct", "{"):
            problems.append("selector without a metric name in %r" % expr)
            _, i = matchers(i)
            continue
        i += 1
    return selectors, groupings, problems


def check_expr(expr, series, where):
    """Returns the problems of one PromQL expression, naming `where`."""
    try:
        selectors, groupings, problems = analyze(expr)
    except (ValueError, IndexError) as error:
        return ["%s: %s" % (where, error)]
    problems = ["%s: %s" % (where, p) for p in problems]
    if not selectors:
        problems.append("%s: no metric in %r" % (where, expr))
    known_labels = set(TARGET_LABELS)
    for metric, found in selectors:
        if metric not in series:
            problems.append("%s: %s is not declared in server/metrics.cc"
                            % (where, metric))
            continue
        labels = series[metric]
        known_labels |= set(labels)
        for label, op, value in found:
            if label in TARGET_LABELS:
                continue
            if label not in labels:
                problems.append("%s: %s has no label %r (it has %s)"
                                % (where, metric, label, sorted(labels)))
                continue
            allowed = labels[label]
            if allowed is None or "$" in value:
                continue
            if op in ("=", "!="):
                values = [value]
            elif re.fullmatch(r"\w+(\|\w+)*", value):
                values = value.split("|")
            else:
                continue
            for v in values:
                if v not in allowed:
                    problems.append("%s: %s{%s} is never %r (it is one of %s)"
                                    % (where, metric, label, v, sorted(allowed)))
    for label in groupings:
        if label not in known_labels:
            problems.append("%s: grouping label %r is on none of the metrics"
                            % (where, label))
    return problems


# --------------------------------------------------------------------------
# The files under test.
# --------------------------------------------------------------------------

def dashboard_queries(dashboard):
    """Yields (where, PromQL) for every panel target and template variable."""
    def walk(panels):
        for panel in panels:
            for target in panel.get("targets", []):
                yield ("panel %r" % panel.get("title"), target.get("expr", ""))
            yield from walk(panel.get("panels", []))
    yield from walk(dashboard.get("panels", []))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        if isinstance(query, dict):
            query = query.get("query", "")
        match = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\)\s*", query)
        if match:  # Grafana's label_values(selector, label)
            yield ("variable $%s" % variable["name"],
                   "group by (%s) (%s)" % (match.group(2), match.group(1)))
        else:
            yield ("variable $%s" % variable["name"], query)


def alert_rules(text):
    """Reads a Prometheus rule file (the subset alerts.yml uses, no PyYAML).

    Returns [{"alert", "expr", "for", "severity", "summary", "description"}].
    """
    rules, rule, lines = [], None, text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        match = re.match(r"^(\s*)(?:- )?(\w+):\s*(.*)$", line)
        if not match or line.lstrip().startswith("#"):
            continue
        indent, key, value = len(match.group(1)), match.group(2), match.group(3)
        if value in ("|", "|-", ">", ">-"):  # block scalar
            block = []
            while i < len(lines) and (not lines[i].strip() or
                                      len(lines[i]) - len(lines[i].lstrip())
                                      > indent):
                block.append(lines[i].strip())
                i += 1
            value = "\n".join(block).strip()
        elif len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        if key == "alert":
            rule = {"alert": value}
            rules.append(rule)
        elif rule is not None and key in ("expr", "for", "severity", "summary",
                                          "description"):
            rule[key] = value
    return rules


def unit_file(text):
    """Returns {section: {key: value}} of a systemd unit (continuations joined)."""
    sections, section = {}, None
    text = re.sub(r"\\\n\s*", " ", text)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        section[key.strip()] = value.strip()
    return sections


def env_file(text):
    """Returns {name: value} of a systemd EnvironmentFile."""
    values = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = value.strip('"')
    return values


def installed_files():
    """Where deploy/CMakeLists.txt installs the example files: {path under
    /etc/phalanx: source path under deploy/}."""
    cmake = read("deploy", "CMakeLists.txt")
    files = {}
    for block in re.findall(r"install\(FILES ([^)]*?)\s+DESTINATION\s+"
                            r"\$\{PHALANX_ETC\}(/\w+)?\)", cmake):
        sources, subdir = block
        for source in sources.split():
            name = os.path.basename(source)
            files["/etc/phalanx%s/%s" % (subdir, name)] = source
    return files


def bootstrap_files():
    """The files phalanx-bootstrap writes, as paths under /etc/phalanx."""
    script = read("deploy", "phalanx-bootstrap")
    outputs = re.search(r"output_files\(\) {(.*?)\n}", script, re.S).group(1)
    return {"/etc/phalanx/" + f for f in re.findall(r'"\$dir/([\w/.]+)"', outputs)}


def daemon_flags(main_cc):
    return set(re.findall(r"ABSL_FLAG\(\s*[\w:<>]+\s*,\s*(\w+)\s*,", main_cc))


def expand(exec_start, env):
    """ExecStart with its variables filled in from `env`, as systemd does:
    ${NAME} is one word, $NAME is split at white space."""
    text = re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], exec_start)
    return re.sub(r"\$(\w+)", lambda m: env[m.group(1)], text)


def exec_start_flags(exec_start):
    """Returns {flag_name_with_underscores: value or None}."""
    flags = {}
    words = exec_start.split()
    for n, word in enumerate(words[1:], 1):
        if not word.startswith("--"):
            continue
        name, eq, value = word[2:].partition("=")
        if not eq and n + 1 < len(words) and not words[n + 1].startswith("--"):
            value = words[n + 1]
        flags[name.replace("-", "_")] = value or None
    return flags


class DeployFilesTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.series = declared_series(read("server", "metrics.cc"),
                                     read("core", "model.cc"))
        cls.dashboard = json.loads(
            read("deploy", "grafana", "phalanx-dashboard.json"))
        cls.rules = alert_rules(read("deploy", "alerts.yml"))
        cls.unit = unit_file(read("deploy", "phalanxd.service"))
        cls.env = env_file(read("deploy", "phalanxd.env"))
        cls.flags = daemon_flags(read("server", "daemon_options.cc"))
        cls.exec_start = expand(cls.unit["Service"]["ExecStart"], cls.env)

    def test_source_is_read(self):
        # If these go, the regexes above no longer understand metrics.cc.
        self.assertIn("phalanx_events_total", self.series)
        self.assertIn("phalanx_rpc_seconds_bucket", self.series)
        self.assertIn("PENDING", self.series["phalanx_gangs"]["state"])
        self.assertIn("ADMITTED", self.series["phalanx_events_total"]["type"])
        self.assertIn("fair_share_score", self.series["phalanx_queue"]["figure"])
        self.assertIsNone(self.series["phalanx_queue"]["queue"])
        self.assertIn("data_dir", self.flags)

    def test_dashboard_queries_use_declared_metrics(self):
        queries = list(dashboard_queries(self.dashboard))
        self.assertGreater(len(queries), 20)
        problems = []
        for where, expr in queries:
            problems += check_expr(expr, self.series, where)
        self.assertEqual(problems, [])

    def test_dashboard_shape(self):
        d = self.dashboard
        self.assertGreaterEqual(d["schemaVersion"], 37)
        self.assertIn("DS_PROMETHEUS", [i["name"] for i in d["__inputs"]])
        ids, panels = [], []
        for panel in d["panels"]:
            panels += [panel] + panel.get("panels", [])
        for panel in panels:
            ids.append(panel["id"])
            self.assertTrue(panel.get("title"), panel)
            if panel["type"] == "row":
                continue
            self.assertTrue(panel.get("targets"), panel["title"])
            self.assertIn("unit", panel["fieldConfig"]["defaults"], panel["title"])
            for target in [panel] + panel["targets"]:
                self.assertEqual(target["datasource"]["uid"], "${DS_PROMETHEUS}",
                                 panel["title"])
        self.assertEqual(len(ids), len(set(ids)), "panel ids repeat")

    def test_alerts_use_declared_metrics(self):
        self.assertGreaterEqual(len(self.rules), 3)
        problems = []
        for rule in self.rules:
            where = "alert %s" % rule["alert"]
            for key in ("expr", "severity", "summary"):
                self.assertIn(key, rule, where)
            problems += check_expr(rule["expr"], self.series, where)
            # Annotations may only print labels the expression keeps.
            selectors, groupings, _ = analyze(rule["expr"])
            labels = set(TARGET_LABELS) | set(groupings)
            for metric, _ in selectors:
                labels |= set(self.series.get(metric, {}))
            for label in re.findall(r"\$labels\.(\w+)",
                                    rule["summary"] + rule.get("description", "")):
                if label not in labels:
                    problems.append("%s: annotation uses $labels.%s" % (where, label))
        names = [rule["alert"] for rule in self.rules]
        self.assertEqual(len(names), len(set(names)), "alert names repeat")
        self.assertEqual(problems, [])

    def test_unit_runs_the_daemon_with_real_flags(self):
        service = self.unit["Service"]
        self.assertEqual(service["Type"], "simple")
        self.assertEqual(service["Restart"], "on-failure")
        for key in ("User", "StateDirectory", "LimitNOFILE", "TimeoutStopSec"):
            self.assertIn(key, service)
        self.assertIn("WantedBy", self.unit["Install"])
        flags = exec_start_flags(self.exec_start)
        unknown = sorted(set(flags) - self.flags)
        self.assertEqual(unknown, [], "flags not in server/daemon_options.cc")
        # The store lives in the directory systemd creates for the user.
        self.assertEqual(flags.get("data_dir"),
                         "/var/lib/" + service["StateDirectory"].split()[0])

    def test_unit_runs_the_installed_binary_with_its_env_file(self):
        service = self.unit["Service"]
        # The package installs under /usr (deploy/CMakeLists.txt).
        self.assertEqual(service["ExecStart"].split()[0], "/usr/bin/phalanxd")
        self.assertEqual(service["EnvironmentFile"], "/etc/phalanx/phalanxd.env")
        self.assertEqual(installed_files().get(service["EnvironmentFile"]),
                         "phalanxd.env")
        used = set(re.findall(r"\$\{?(\w+)\}?", service["ExecStart"]))
        self.assertEqual(sorted(used - set(self.env)), [])

    def test_unit_serves_tls_with_auth_and_loads_the_start_up_files(self):
        flags = exec_start_flags(self.exec_start)
        for flag in ("auth", "tls_cert", "tls_key", "config", "fleet", "queues"):
            self.assertIn(flag, flags)
        written, installed = bootstrap_files(), installed_files()
        for flag in ("auth", "tls_cert", "tls_key"):
            self.assertIn(flags[flag], written, flag)
        for flag in ("config", "fleet", "queues"):
            self.assertIn(flags[flag], installed, flag)

    def test_unit_may_write_the_backup_directory(self):
        service = self.unit["Service"]
        self.assertEqual(service["ProtectSystem"], "strict")
        self.assertIn("/var/backups/phalanx",
                      [p.lstrip("-") for p in service["ReadWritePaths"].split()])
        self.assertIn("/var/backups/phalanx", read("deploy", "debian", "postinst"))

    def test_prometheus_scrapes_the_unit_metrics_port(self):
        config = read("deploy", "prometheus.yml")
        self.assertRegex(config, r"(?m)^rule_files:\s*\n\s*- alerts\.yml")
        job = re.search(r"job_name:\s*(\S+)", config).group(1)
        targets = re.findall(r'targets:\s*\["([^"]+)"\]', config)
        listen = exec_start_flags(self.exec_start).get("metrics_listen")
        self.assertIsNotNone(listen)
        self.assertIn(listen.rsplit(":", 1)[1],
                      [t.rsplit(":", 1)[1] for t in targets])
        for rule in self.rules:
            for value in re.findall(r'job="([^"]*)"', rule["expr"]):
                self.assertEqual(value, job, rule["alert"])


class NodeAgentUnitTest(unittest.TestCase):
    """deploy/phalanx-node-agent.service runs the agent with its real flags."""

    def test_agent_unit_runs_the_agent_with_real_flags(self):
        unit = unit_file(read("deploy", "phalanx-node-agent.service"))
        service = unit["Service"]
        self.assertTrue(
            service["ExecStart"].split()[0].endswith("/phalanx-node-agent"))
        known = set(name.replace("-", "_") for name in re.findall(
            r'"--([a-z-]+)"', read("clients", "node_agent", "agent_flags.cc")))
        flags = exec_start_flags(service["ExecStart"])
        self.assertIn("token_file", flags)
        unknown = sorted(set(flags) - known)
        self.assertEqual(unknown, [],
                         "flags not in clients/node_agent/agent_flags.cc")
        self.assertEqual(service["KillSignal"], "SIGTERM")
        self.assertIn("WantedBy", unit["Install"])


class HaDeployFilesTest(unittest.TestCase):
    """deploy/ha/: the replica unit's flags are real, every variable the
    units use is set by their env files, and the members agree."""
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.flags = daemon_flags(read("server", "daemon_options.cc"))
        cls.unit = unit_file(read("deploy", "ha", "phalanxd@.service"))
        cls.shared = env_file(read("deploy", "ha", "phalanxd.env"))

    def test_replica_unit_runs_the_daemon_with_real_flags(self):
        service = self.unit["Service"]
        flags = exec_start_flags(service["ExecStart"])
        self.assertTrue(service["ExecStart"].split()[0].endswith("/phalanxd"))
        self.assertEqual(sorted(set(flags) - self.flags), [],
                         "flags not in server/daemon_options.cc")
        for flag in ("etcd_endpoints", "replica_id", "advertise_address",
                     "etcd_prefix", "etcd_lease_ttl"):
            self.assertIn(flag, flags)
        for flag in self.shared["PHALANX_STARTUP_FLAGS"].split():
            self.assertIn(flag[2:].partition("=")[0].replace("-", "_"),
                          self.flags)

    def test_replica_unit_serves_tls_with_auth(self):
        service = self.unit["Service"]
        self.assertEqual(service["ExecStart"].split()[0], "/usr/bin/phalanxd")
        own = env_file(read("deploy", "ha", "phalanxd-r0.env"))
        flags = exec_start_flags(expand(service["ExecStart"],
                                        dict(self.shared, **own)))
        written = bootstrap_files()
        for flag in ("auth", "tls_cert", "tls_key"):
            self.assertIn(flags.get(flag), written, flag)
        # etcd's TLS flags have their place in the shared env file.
        self.assertIn("$PHALANX_ETCD_TLS_FLAGS", service["ExecStart"])
        for flag in re.findall(r"--([\w-]+)=", read("deploy", "ha", "phalanxd.env")):
            self.assertIn(flag.replace("-", "_"), self.flags)
        self.assertIn("/var/backups/phalanx", service["ReadWritePaths"])

    def test_every_env_file_is_installed(self):
        installed = installed_files()
        for name in ("phalanxd.env", "phalanxd-r0.env", "phalanxd-r1.env",
                     "phalanxd-r2.env", "etcd-e0.env", "etcd-e1.env",
                     "etcd-e2.env"):
            self.assertEqual(installed.get("/etc/phalanx/ha/" + name),
                             "ha/" + name)

    def test_every_variable_is_set(self):
        used = set(re.findall(r"\$\{?(\w+)\}?", self.unit["Service"]["ExecStart"]))
        for r in ("r0", "r1", "r2"):
            own = env_file(read("deploy", "ha", "phalanxd-%s.env" % r))
            self.assertEqual(sorted(used - set(self.shared) - set(own)), [], r)

    def test_etcd_members_form_one_cluster(self):
        endpoints = self.shared["PHALANX_ETCD_ENDPOINTS"].split(",")
        clusters = set()
        for n, m in enumerate(("e0", "e1", "e2")):
            env = env_file(read("deploy", "ha", "etcd-%s.env" % m))
            self.assertEqual(env["ETCD_NAME"], m)
            self.assertEqual(env["ETCD_ADVERTISE_CLIENT_URLS"], endpoints[n])
            self.assertIn("%s=%s" % (m, env["ETCD_INITIAL_ADVERTISE_PEER_URLS"]),
                          env["ETCD_INITIAL_CLUSTER"].split(","))
            clusters.add(env["ETCD_INITIAL_CLUSTER"])
        self.assertEqual(len(clusters), 1)


class CheckerCatchesTyposTest(unittest.TestCase):
    """The checker itself: each of these must be reported."""
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.series = declared_series(read("server", "metrics.cc"),
                                     read("core", "model.cc"))

    def problems(self, expr):
        return check_expr(expr, self.series, "case")

    def test_good_expression_passes(self):
        self.assertEqual(self.problems(
            'histogram_quantile(0.99, sum by (queue, le) (rate('
            'phalanx_admission_wait_seconds_bucket{job=~"$job",queue=~"$queue"}'
            '[$__rate_interval])))'), [])

    def test_misspelled_metric(self):
        self.assertTrue(self.problems('sum(phalanx_gang{state="PENDING"})'))

    def test_counter_without_its_declared_suffix(self):
        self.assertTrue(self.problems("rate(phalanx_events[5m])"))

    def test_histogram_base_name_is_not_a_series(self):
        self.assertTrue(self.problems("rate(phalanx_cycle_seconds[5m])"))

    def test_wrong_label(self):
        self.assertTrue(self.problems('phalanx_gpus{queue="q"}'))

    def test_wrong_grouping_label(self):
        self.assertTrue(self.problems("sum by (queue) (phalanx_gpus)"))

    def test_wrong_label_value(self):
        self.assertTrue(self.problems(
            'rate(phalanx_events_total{type=~"ADMITTED|PREEMPTED"}[5m])'))

    def test_unknown_function(self):
        self.assertTrue(self.problems("rat(phalanx_events_total[5m])"))

    def test_unknown_flag(self):
        flags = exec_start_flags("/usr/bin/phalanxd --data-dir=/x --metric-listen :1")
        self.assertEqual(sorted(set(flags) - daemon_flags(read("server", "daemon_options.cc"))),
                         ["metric_listen"])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ROOT = sys.argv.pop(1)
    unittest.main(verbosity=2)
