// Partial updates with google.protobuf.FieldMask (UpdateConfig, PutQueue):
// checking a mask's paths against a message type, and copying the named
// fields from one message onto another. Stateless; thread-safe.
#ifndef PHALANX_PROTO_FIELD_MASK_H_
#define PHALANX_PROTO_FIELD_MASK_H_

#include <initializer_list>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/field_mask.pb.h"
#include "google/protobuf/message.h"

namespace phalanx::convert {

// OK when every path of `mask` names a field of `type` (proto field names,
// dotted through singular message fields: "preemption.enabled"). Fails with
// InvalidArgument naming `field`.paths[i] for an empty or unknown path, one
// that passes through a repeated or map field, or one equal to or under a
// `refused` path (output-only fields such as "version").
absl::Status CheckFieldMask(const google::protobuf::FieldMask& mask,
                            const google::protobuf::Descriptor& type,
                            std::initializer_list<absl::string_view> refused,
                            absl::string_view field);

// Copies the fields `mask` names from `from` onto `to` (same type; the mask
// passed CheckFieldMask): a named message field is replaced whole, repeated
// and map fields are replaced, and a named field unset in `from` is
// cleared in `to` (back to its default).
void ApplyFieldMask(const google::protobuf::FieldMask& mask,
                    const google::protobuf::Message& from,
                    google::protobuf::Message* to);

}  // namespace phalanx::convert

#endif  // PHALANX_PROTO_FIELD_MASK_H_
