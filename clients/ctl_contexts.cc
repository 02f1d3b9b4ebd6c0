#include "clients/ctl_contexts.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "clients/ctl_format.h"
#include "nlohmann/json.hpp"

namespace phalanx::ctl {
namespace {

using Json = nlohmann::json;

// A context's keys and the fields they fill.
const std::vector<std::pair<std::string, std::string ClientContext::*>>&
ContextKeys() {
  static const auto* keys =
      new std::vector<std::pair<std::string, std::string ClientContext::*>>{
          {"server", &ClientContext::server},
          {"tokenFile", &ClientContext::token_file},
          {"tlsCa", &ClientContext::tls_ca_file},
          {"tlsCert", &ClientContext::tls_cert_file},
          {"tlsKey", &ClientContext::tls_key_file},
          {"tlsServerName", &ClientContext::tls_server_name},
      };
  return *keys;
}

bool IsPathKey(absl::string_view key) {
  return key == "tokenFile" || key == "tlsCa" || key == "tlsCert" ||
         key == "tlsKey";
}

// `value` ("~/x", "/x" or "x") as an absolute path: "~/" is `home`, a
// relative path is relative to the config file's directory `base`.
std::string ResolvePath(const std::string& value, absl::string_view base,
                        absl::string_view home) {
  if (absl::StartsWith(value, "~/") && !home.empty()) {
    return (std::filesystem::path(std::string(home)) / value.substr(2))
        .string();
  }
  if (value.empty() || value[0] == '/') return value;
  return (std::filesystem::path(std::string(base)) / value)
      .lexically_normal()
      .string();
}

absl::Status FieldError(absl::string_view path, absl::string_view field,
                        absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(
      "client config ", SafeCell(path), ": ", SafeCell(field), ": ", problem));
}

absl::StatusOr<ClientContext> ParseContext(const Json& json,
                                           const std::string& field,
                                           absl::string_view path,
                                           absl::string_view home) {
  if (!json.is_object()) return FieldError(path, field, "want an object");
  const std::string base =
      std::filesystem::path(std::string(path)).parent_path().string();
  ClientContext context;
  for (const auto& item : json.items()) {
    const std::string key = item.key();
    const Json& value = item.value();
    const std::string name = absl::StrCat(field, ".", key);
    if (key == "token") {
      return FieldError(path, name,
                        "a token is never stored in the config; put it in a "
                        "file and give its path as tokenFile");
    }
    auto known = std::find_if(ContextKeys().begin(), ContextKeys().end(),
                              [&](const auto& k) { return k.first == key; });
    if (known == ContextKeys().end()) {
      return FieldError(path, name, "unknown key");
    }
    if (!value.is_string()) return FieldError(path, name, "want a string");
    std::string text = value.get<std::string>();
    if (IsPathKey(key)) text = ResolvePath(text, base, home);
    context.*(known->second) = std::move(text);
  }
  return context;
}

}  // namespace

std::string ClientConfigPath(absl::string_view env_config,
                             absl::string_view xdg_config_home,
                             absl::string_view home) {
  if (!env_config.empty()) return std::string(env_config);
  if (!xdg_config_home.empty()) {
    return absl::StrCat(xdg_config_home, "/phalanx/config");
  }
  if (!home.empty()) return absl::StrCat(home, "/.config/phalanx/config");
  return "";
}

absl::StatusOr<std::optional<std::string>> ReadClientConfig(
    const std::string& path, bool must_exist) {
  std::error_code error;
  if (!must_exist && !std::filesystem::exists(path, error)) {
    return std::nullopt;
  }
  std::ifstream file(path, std::ios::binary);
  if (!file.is_open()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read client config ",
                                                   SafeCell(path), ": ",
                                                   std::strerror(errno)));
  }
  std::string text(kMaxClientConfigBytes + 1, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (file.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read client config ",
                                                   SafeCell(path), ": ",
                                                   std::strerror(errno)));
  }
  text.resize(static_cast<size_t>(file.gcount()));
  if (text.size() > kMaxClientConfigBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("client config ", SafeCell(path), ": larger than ",
                     kMaxClientConfigBytes, " bytes"));
  }
  return text;
}

absl::StatusOr<ClientConfig> ParseClientConfig(absl::string_view text,
                                               absl::string_view path,
                                               absl::string_view home) {
  if (absl::StripAsciiWhitespace(text).empty()) return ClientConfig();
  const Json json = Json::parse(text.begin(), text.end(), nullptr,
                                /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("client config ", SafeCell(path), ": not a JSON object"));
  }
  ClientConfig config;
  for (const auto& [key, value] : json.items()) {
    if (key == "currentContext") {
      if (!value.is_string()) return FieldError(path, key, "want a string");
      config.current_context = value.get<std::string>();
    } else if (key == "contexts") {
      if (!value.is_object()) return FieldError(path, key, "want an object");
      for (const auto& [name, body] : value.items()) {
        absl::StatusOr<ClientContext> context =
            ParseContext(body, absl::StrCat("contexts.", name), path, home);
        if (!context.ok()) return context.status();
        config.contexts[name] = *std::move(context);
      }
    } else {
      return FieldError(path, key, "unknown key");
    }
  }
  if (!config.current_context.empty() &&
      config.contexts.count(config.current_context) == 0) {
    return FieldError(
        path, "currentContext",
        absl::StrFormat("no context \"%s\"", SafeCell(config.current_context)));
  }
  return config;
}

absl::StatusOr<const ClientContext*> SelectContext(const ClientConfig& config,
                                                   absl::string_view name) {
  if (name.empty()) {
    if (config.current_context.empty()) return nullptr;
    return &config.contexts.at(config.current_context);
  }
  auto it = config.contexts.find(std::string(name));
  if (it != config.contexts.end()) return &it->second;
  std::vector<std::string> names;
  for (const auto& [known, context] : config.contexts) names.push_back(known);
  return absl::InvalidArgumentError(absl::StrFormat(
      "--context: no context \"%s\" in the client config (it has: %s)",
      SafeCell(name), names.empty() ? "none" : absl::StrJoin(names, ", ")));
}

void ApplyContext(const ClientContext& context,
                  const std::set<std::string>& given,
                  ConnectionOptions* connection) {
  auto fill = [&](const char* flag, const std::string& value,
                  std::string* field) {
    if (!value.empty() && given.count(flag) == 0) *field = value;
  };
  // The context's credentials go to its own server only: a server set
  // elsewhere that the context does not name gets none of them.
  const bool own_server = given.count("--server") == 0 ||
                          context.server.empty() ||
                          context.server == connection->server;
  fill("--server", context.server, &connection->server);
  if (own_server && given.count("--token") == 0) {
    fill("--token-file", context.token_file, &connection->token_file);
  }
  fill("--tls-ca", context.tls_ca_file, &connection->tls_ca_file);
  if (own_server) {
    fill("--tls-cert", context.tls_cert_file, &connection->tls_cert_file);
    fill("--tls-key", context.tls_key_file, &connection->tls_key_file);
  }
  fill("--tls-server-name", context.tls_server_name,
       &connection->tls_server_name);
}

}  // namespace phalanx::ctl
