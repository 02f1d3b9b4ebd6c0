#!/usr/bin/python3
"""The install, checked in CI without installing anything.

BootstrapTest: deploy/phalanx-bootstrap writes a CA, a server certificate
that `openssl verify` accepts for the names given, an admin token and the
auth.json of its hash, each with its mode; it never prints the token and
keeps existing files unless --force. Then phalanxd runs with the single-node
unit's own ExecStart (deploy/phalanxd.service with deploy/phalanxd.env,
only the directories moved into a temporary one and the ports made
ephemeral) and the installed-to-be phalanxctl submits a gang over TLS with
the token; without the token it is refused.

PackageTest: cpack builds the .deb from the build folder; its files, its
conffiles, its computed Depends and its maintainer scripts are what the
install needs.

Usage: install_test.py SOURCE_DIR BUILD_DIR PHALANXD PHALANXCTL [TEST...]
"""

import grp
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import unittest

import deploy_files_test as deploy_files

SOURCE = BUILD = PHALANXD = PHALANXCTL = None  # set from argv in __main__


def run(args, **kwargs):
    return subprocess.run(args, capture_output=True, text=True, timeout=120,
                          **kwargs)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


class BootstrapTest(unittest.TestCase):
    maxDiff = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="phalanx-install-test-")
        self.etc = os.path.join(self.tmp, "etc")
        self.group = grp.getgrgid(os.getgid()).gr_name
        self.daemon = None

    def tearDown(self):
        if self.daemon and self.daemon.poll() is None:
            self.daemon.kill()
            self.daemon.wait()
        shutil.rmtree(self.tmp)

    def bootstrap(self, *args):
        return run([os.path.join(SOURCE, "deploy", "phalanx-bootstrap"),
                    "--dir", self.etc, "--group", self.group,
                    "--name", "localhost", "--name", "127.0.0.1", *args])

    def path(self, name):
        return os.path.join(self.etc, name)

    def token(self):
        with open(self.path("admin.token"), encoding="ascii") as f:
            return f.read()

    def test_writes_verifiable_certificates_with_tight_modes(self):
        result = self.bootstrap()
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn(self.token(), result.stdout + result.stderr)
        self.assertRegex(self.token(), r"^[0-9a-f]{64}$")
        verify = run(["openssl", "verify", "-CAfile", self.path("tls/ca.crt"),
                      self.path("tls/server.crt")])
        self.assertEqual(verify.returncode, 0, verify.stdout + verify.stderr)
        names = run(["openssl", "x509", "-noout", "-ext", "subjectAltName",
                     "-in", self.path("tls/server.crt")]).stdout
        self.assertIn("DNS:localhost", names)
        self.assertIn("IP Address:127.0.0.1", names)
        expected = {"tls/ca.crt": 0o644, "tls/server.crt": 0o644,
                    "tls/ca.key": 0o600, "tls/server.key": 0o640,
                    "admin.token": 0o600, "auth.json": 0o640}
        self.assertEqual({f: mode(self.path(f)) for f in expected}, expected)
        for name in ("tls/server.key", "auth.json"):
            self.assertEqual(os.stat(self.path(name)).st_gid, os.getgid(), name)

    def test_auth_file_holds_the_hash_of_the_token(self):
        self.assertEqual(self.bootstrap().returncode, 0)
        with open(self.path("auth.json"), encoding="utf-8") as f:
            auth = f.read()
        digest = run(["sha256sum"], input=self.token()).stdout.split()[0]
        self.assertIn('"tokenSha256": "%s"' % digest, auth)
        self.assertIn('"ROLE_ADMIN"', auth)
        self.assertNotIn(self.token(), auth)

    def test_keeps_existing_secrets_unless_forced(self):
        self.assertEqual(self.bootstrap().returncode, 0)
        first = self.token()
        again = self.bootstrap()
        self.assertEqual(again.returncode, 1)
        self.assertIn("--force", again.stderr)
        self.assertEqual(self.token(), first)
        self.assertEqual(self.bootstrap("--force").returncode, 0)
        self.assertNotEqual(self.token(), first)

    def test_rejects_a_bad_name(self):
        result = self.bootstrap("--name", "a b")
        self.assertEqual(result.returncode, 1)
        self.assertFalse(os.path.exists(self.etc))

    def unit_command(self):
        """The unit's ExecStart, its paths moved under self.tmp."""
        unit = deploy_files.unit_file(deploy_files.read("deploy", "phalanxd.service"))
        env = deploy_files.env_file(deploy_files.read("deploy", "phalanxd.env"))
        env["PHALANX_LISTEN"] = "127.0.0.1:0"
        env["PHALANX_METRICS_LISTEN"] = "127.0.0.1:0"
        words = deploy_files.expand(unit["Service"]["ExecStart"], env).split()
        self.assertEqual(words[0], "/usr/bin/phalanxd")
        moved = {"/etc/phalanx/": self.etc + "/",
                 "/var/lib/phalanx": os.path.join(self.tmp, "data")}
        command = [PHALANXD]
        for word in words[1:]:
            for old, new in moved.items():
                word = word.replace(old, new)
            command.append(word)
        return command

    def start_daemon(self):
        """Starts the unit's command; returns its gRPC address."""
        for name in ("config.json", "fleet.json", "queues.json"):
            shutil.copy(os.path.join(SOURCE, "deploy", name), self.etc)
        log_path = os.path.join(self.tmp, "phalanxd.log")
        with open(log_path, "w", encoding="utf-8") as log:
            self.daemon = subprocess.Popen(self.unit_command(), stdout=log,
                                           stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.daemon.poll() is None:
            with open(log_path, encoding="utf-8", errors="replace") as log:
                output = log.read()
            match = re.search(r"grpc listening on 127\.0\.0\.1:(\d+) \(TLS\)", output)
            if match:
                return "127.0.0.1:" + match.group(1)
            time.sleep(0.1)
        with open(log_path, encoding="utf-8", errors="replace") as log:
            self.fail("phalanxd did not start:\n" + log.read())

    def ctl(self, address, *args, token=True):
        command = [PHALANXCTL, "--server", address, "--tls-ca", self.path("tls/ca.crt")]
        if token:
            command += ["--token-file", self.path("admin.token")]
        env = {k: v for k, v in os.environ.items() if not k.startswith("PHALANX_")}
        return run(command + list(args), env=env)

    def test_the_unit_command_serves_tls_and_the_token(self):
        self.assertEqual(self.bootstrap().returncode, 0)
        address = self.start_daemon()
        submit = self.ctl(address, "submit", "--queue", "llm-finetune",
                          "--pods", "2", "--gpus", "8", "--level", "rack")
        self.assertEqual(submit.returncode, 0, submit.stderr)
        gang = self.ctl(address, "get", "g-000001")
        self.assertEqual(gang.returncode, 0, gang.stderr)
        self.assertRegex(gang.stdout, r"(?m)^Owner:\s+admin$")
        self.assertRegex(gang.stdout, r"(?m)^State:\s+ADMITTED$")
        refused = self.ctl(address, "list", token=False)
        self.assertEqual(refused.returncode, 1)
        self.assertIn("UNAUTHENTICATED", refused.stderr)
        self.daemon.terminate()
        self.assertEqual(self.daemon.wait(timeout=30), 0)


class PackageTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="phalanx-package-test-")
        result = run(["cpack", "-G", "DEB", "-B", cls.tmp], cwd=BUILD)
        if result.returncode != 0:
            raise RuntimeError("cpack failed:\n" + result.stdout + result.stderr)
        debs = [f for f in os.listdir(cls.tmp) if f.endswith(".deb")]
        if len(debs) != 1:
            raise RuntimeError("cpack wrote %s" % debs)
        cls.deb = os.path.join(cls.tmp, debs[0])
        listing = run(["dpkg-deb", "-c", cls.deb]).stdout
        cls.files = {}  # path -> mode string
        for line in listing.splitlines():
            fields = line.split()
            cls.files[fields[5].lstrip(".")] = fields[0]
        cls.control = os.path.join(cls.tmp, "control")
        subprocess.run(["dpkg-deb", "-e", cls.deb, cls.control], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def field(self, name):
        return run(["dpkg-deb", "-f", self.deb, name]).stdout.strip()

    def control_file(self, name):
        with open(os.path.join(self.control, name), encoding="utf-8") as f:
            return f.read()

    def test_holds_the_programs_units_and_client(self):
        expected = [
            "/usr/bin/phalanxd", "/usr/bin/phalanxctl", "/usr/bin/phalanx-sim",
            "/usr/sbin/phalanx-bootstrap",
            "/usr/lib/systemd/system/phalanxd.service",
            "/usr/lib/systemd/system/phalanxd@.service",
            "/usr/lib/systemd/system/etcd-phalanx@.service",
            "/usr/lib/python3/dist-packages/phalanx/__init__.py",
            "/usr/lib/python3/dist-packages/phalanx/client.py",
            "/usr/lib/python3/dist-packages/phalanx/v1/scheduler_pb2_grpc.py",
            "/usr/share/phalanx/phalanx-dashboard.json",
            "/usr/share/phalanx/alerts.yml",
        ]
        self.assertEqual([f for f in expected if f not in self.files], [])
        for program in expected[:3]:
            self.assertEqual(self.files[program], "-rwxr-xr-x", program)

    def test_every_path_the_units_name_is_installed_or_bootstrapped(self):
        bootstrapped = deploy_files.bootstrap_files()
        for name in ("phalanxd.service", "phalanxd.env", "ha/phalanxd@.service",
                     "ha/phalanxd.env", "ha/etcd@.service"):
            lines = deploy_files.read("deploy", name).splitlines()
            text = "\n".join(l for l in lines if not l.startswith("#"))
            paths = re.findall(r"(/(?:usr|etc)/[\w/.@%-]+)", text)
            self.assertTrue(paths or name == "ha/etcd@.service", name)
            for path in paths:
                if "%i" in path or path in bootstrapped or path == "/usr/bin/etcd":
                    continue
                self.assertIn(path, self.files, "%s names %s" % (name, path))

    def test_configuration_is_conffiles(self):
        conffiles = self.control_file("conffiles").split()
        etc = sorted(f for f, m in self.files.items()
                     if f.startswith("/etc/") and not m.startswith("d"))
        self.assertEqual(sorted(conffiles), etc)
        self.assertIn("/etc/phalanx/phalanxd.env", conffiles)
        self.assertIn("/etc/phalanx/ha/etcd-e0.env", conffiles)

    def test_depends_are_computed(self):
        depends = self.field("Depends")
        for package in ("libgrpc++1.51", "librocksdb7.8", "libprotobuf32",
                        "libc6", "openssl", "passwd"):
            self.assertRegex(depends, r"(^|, )%s( |,|$)" % re.escape(package))
        self.assertIn("python3-grpcio", self.field("Recommends"))

    def test_postinst_makes_the_user_and_directories(self):
        postinst = self.control_file("postinst")
        self.assertIn("useradd --system", postinst)
        self.assertIn("/var/lib/phalanx /var/backups/phalanx", postinst)
        self.assertEqual(mode(os.path.join(self.control, "postinst")), 0o755)
        self.assertEqual(run(["sh", "-n", os.path.join(self.control, "postinst")])
                         .returncode, 0)


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    SOURCE, BUILD, PHALANXD, PHALANXCTL = sys.argv[1:5]
    deploy_files.ROOT = SOURCE
    del sys.argv[1:5]
    unittest.main(verbosity=2)
