// The client config file of phalanxctl ($PHALANX_CONFIG, else
// ~/.config/phalanx/config): named contexts, each the servers to call and
// the files that prove who the user is (a token file, TLS roots, a client
// certificate and key), like a kubeconfig, so that one `--context NAME`
// (or the file's currentContext) replaces six flags. A token is referenced
// by its file's path, never stored in the config. Everything here is pure
// but ReadClientConfig, which reads the file. Plain functions and data;
// thread-compatible.
#ifndef PHALANX_CLIENTS_CTL_CONTEXTS_H_
#define PHALANX_CLIENTS_CTL_CONTEXTS_H_

#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/ctl_options.h"

namespace phalanx::ctl {

// The largest client config file read.
inline constexpr size_t kMaxClientConfigBytes = 1 << 20;

// One named context; "" = not set. Paths are absolute once parsed.
struct ClientContext {
  std::string server;           // as --server
  std::string token_file;       // as --token-file
  std::string tls_ca_file;      // as --tls-ca
  std::string tls_cert_file;    // as --tls-cert
  std::string tls_key_file;     // as --tls-key
  std::string tls_server_name;  // as --tls-server-name
};

// The whole file.
struct ClientConfig {
  std::string current_context;  // "" = none
  std::map<std::string, ClientContext> contexts;
};

// Returns the path of the client config file: `env_config`
// ($PHALANX_CONFIG) when not empty; else
// `xdg_config_home`/phalanx/config ($XDG_CONFIG_HOME); else
// `home`/.config/phalanx/config ($HOME); "" when all three are empty.
std::string ClientConfigPath(absl::string_view env_config,
                             absl::string_view xdg_config_home,
                             absl::string_view home);

// Returns the text of the file at `path`, or nullopt when it does not exist
// and `must_exist` is false (the default path: no file, no contexts).
// Fails with InvalidArgument naming the file when it cannot be read, is
// missing although `must_exist` ($PHALANX_CONFIG named it), or is larger
// than kMaxClientConfigBytes.
absl::StatusOr<std::optional<std::string>> ReadClientConfig(
    const std::string& path, bool must_exist);

// Parses the file's JSON:
//   {"currentContext": "prod",
//    "contexts": {"prod": {"server": "a:50051,b:50051",
//                          "tokenFile": "~/.phalanx/prod.token",
//                          "tlsCa": "ca.pem", "tlsCert": "me.pem",
//                          "tlsKey": "me.key",
//                          "tlsServerName": "phalanx.internal"}}}
// Every key is optional; an empty (or all-space) text is a config
// without contexts. A relative path is relative to the directory of
// `path`; "~/" starts at `home`. Fails with InvalidArgument naming `path`
// and the field (`contexts.prod.tlsCa: want a string`) when the text is
// not a JSON object, a key is unknown, a value is not a string (an object
// for a context), a context has a "token" (never stored: use tokenFile),
// or currentContext names no context.
absl::StatusOr<ClientConfig> ParseClientConfig(absl::string_view text,
                                               absl::string_view path,
                                               absl::string_view home);

// Returns the context named `name`, or the current one when `name` is
// empty; nullptr when `name` is empty and the file has no currentContext.
// Fails with InvalidArgument listing the contexts when `name` is not one.
absl::StatusOr<const ClientContext*> SelectContext(const ClientConfig& config,
                                                   absl::string_view name);

// Fills the fields of `connection` that the user did not set from
// `context`. `given` holds the global flags given on the command line
// ("--server", "--token", "--token-file", "--tls-ca", ...), plus "--server"
// when $PHALANX_SERVER is set and "--token" when $PHALANX_TOKEN is: those
// win over the file. The context's token file is used only when no token
// came from elsewhere; its credentials (token file, client certificate and
// key) only when the server is the context's own, not one given by a flag
// or $PHALANX_SERVER that the context does not name.
void ApplyContext(const ClientContext& context,
                  const std::set<std::string>& given,
                  ConnectionOptions* connection);

}  // namespace phalanx::ctl

#endif  // PHALANX_CLIENTS_CTL_CONTEXTS_H_
