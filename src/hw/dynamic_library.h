#pragma once
// DynamicLibrary: a shared library opened with dlopen(3) at run time, so gpugeek builds and runs
// without the vendor SDKs (no CUDA, no ROCm headers or libraries needed) and reports a missing
// driver as a problem instead of failing to start.

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace gpugeek::hw {

class DynamicLibrary {
 public:
  // Opens `path` (a file path, or a soname searched as dlopen(3) does) with RTLD_NOW | RTLD_LOCAL.
  // NotFound carrying dlerror(3)'s text when it cannot be loaded.
  static absl::StatusOr<std::unique_ptr<DynamicLibrary>> Open(const std::string& path);
  ~DynamicLibrary();  // dlclose(3); pointers from Find are invalid afterwards
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // The address of `symbol` cast to `Fn*`; nullptr when the library does not export it. The
  // caller vouches that `Fn` matches the symbol's C signature.
  template <typename Fn>
  Fn* Find(const char* symbol) const {
    return reinterpret_cast<Fn*>(FindRaw(symbol));
  }

  const std::string& path() const { return path_; }

 private:
  DynamicLibrary(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* FindRaw(const char* symbol) const;

  void* const handle_;
  const std::string path_;
};

}  // namespace gpugeek::hw
