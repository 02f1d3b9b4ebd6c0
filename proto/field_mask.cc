#include "proto/field_mask.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/validate.h"
#include "google/protobuf/util/field_mask_util.h"

namespace phalanx::convert {

using google::protobuf::util::FieldMaskUtil;

absl::Status CheckFieldMask(const google::protobuf::FieldMask& mask,
                            const google::protobuf::Descriptor& type,
                            std::initializer_list<absl::string_view> refused,
                            absl::string_view field) {
  for (int i = 0; i < mask.paths_size(); ++i) {
    const std::string& path = mask.paths(i);
    const std::string where = absl::StrCat(field, ".paths[", i, "]");
    if (path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": empty path"));
    }
    for (absl::string_view no : refused) {
      if (path == no || absl::StartsWith(path, absl::StrCat(no, "."))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", core::QuoteForError(path),
                         " cannot be set (output only)"));
      }
    }
    if (!FieldMaskUtil::GetFieldDescriptors(&type, path, nullptr)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": ", core::QuoteForError(path), " is not a field of ",
          type.full_name(), " (proto field names, dotted through messages)"));
    }
  }
  return absl::OkStatus();
}

void ApplyFieldMask(const google::protobuf::FieldMask& mask,
                    const google::protobuf::Message& from,
                    google::protobuf::Message* to) {
  FieldMaskUtil::MergeOptions options;
  options.set_replace_message_fields(true);
  options.set_replace_repeated_fields(true);
  FieldMaskUtil::MergeMessageTo(from, mask, options, to);
}

}  // namespace phalanx::convert
