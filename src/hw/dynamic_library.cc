#include "hw/dynamic_library.h"

#include <dlfcn.h>

#include "fmt/format.h"

namespace gpugeek::hw {

absl::StatusOr<std::unique_ptr<DynamicLibrary>> DynamicLibrary::Open(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::NotFoundError(fmt::format("cannot load {}: {}", path, why != nullptr ? why : "unknown error"));
  }
  return std::unique_ptr<DynamicLibrary>(new DynamicLibrary(handle, path));
}

DynamicLibrary::~DynamicLibrary() { dlclose(handle_); }

void* DynamicLibrary::FindRaw(const char* symbol) const { return dlsym(handle_, symbol); }

}  // namespace gpugeek::hw
