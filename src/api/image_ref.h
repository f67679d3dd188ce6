#pragma once
// Container image references of a job spec's `image:` field and of a node's image list.
//
// Grammar (a strict subset of the OCI distribution reference; no digests, no shell metacharacters):
//   REF       = [DOMAIN "/"] PATH [":" TAG]
//   DOMAIN    = "localhost" | a host with a '.' and/or ":PORT" (e.g. registry.example.com:5000)
//   PATH      = COMPONENT ("/" COMPONENT)*,  COMPONENT = [a-z0-9]+ ((".", "_", "__", "-"+) [a-z0-9]+)*
//   TAG       = [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}
// at most kMaxImageRefBytes in all.
//
// Canonical form: what podman names an image it imported: a reference without a domain is a local
// image, "localhost/PATH", and one without a tag is ":latest". So `pytorch`, `localhost/pytorch` and
// `localhost/pytorch:latest` all mean "localhost/pytorch:latest", the name `podman images` lists.

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace gpugeek::api {

inline constexpr size_t kMaxImageRefBytes = 255;

// The canonical form of `ref` ("busybox" -> "localhost/busybox:latest"), or InvalidArgument whose
// message starts with `field` (e.g. "image") and says which rule the value breaks and how to write it.
absl::StatusOr<std::string> CanonicalImageRef(std::string_view field, std::string_view ref);

}  // namespace gpugeek::api
