#pragma once
// Test helpers: temporary folders, files, and raw tar archives with entries a packer would never write.

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gpugeek::archive::testing {

inline std::string TempDir(const std::string& tag) {
  std::string t = (std::filesystem::temp_directory_path() / ("gpugeek-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(t.data()) == nullptr) std::abort();
  return t;
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

struct RawEntry {
  std::string path;
  unsigned int type = AE_IFREG;
  std::string data;  // file contents, or a link's target
  bool hardlink = false;
};

// A tar (pax, zstd) holding exactly `entries`, as given.
inline std::string RawTar(const std::vector<RawEntry>& entries) {
  std::vector<char> buf(1 << 20);
  size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_zstd(a);
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const RawEntry& r : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, r.path.c_str());
    archive_entry_set_filetype(e, r.type);
    archive_entry_set_perm(e, 0644);
    if (r.hardlink) {
      archive_entry_set_hardlink(e, r.data.c_str());
    } else if (r.type == AE_IFLNK) {
      archive_entry_set_symlink(e, r.data.c_str());
    } else if (r.type == AE_IFREG) {
      archive_entry_set_size(e, static_cast<la_int64_t>(r.data.size()));
    }
    archive_write_header(a, e);
    if (r.type == AE_IFREG && !r.hardlink) archive_write_data(a, r.data.data(), r.data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

// The entry paths of an archive file, in order ("name" for files, "name/" for folders, "name -> target").
inline std::vector<std::string> ListTar(const std::string& path) {
  std::vector<std::string> out;
  struct archive* a = archive_read_new();
  archive_read_support_format_tar(a);
  archive_read_support_filter_all(a);
  if (archive_read_open_filename(a, path.c_str(), 1 << 16) == ARCHIVE_OK) {
    archive_entry* e = nullptr;
    while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
      std::string name = archive_entry_pathname(e);
      if (archive_entry_filetype(e) == AE_IFLNK) name += std::string(" -> ") + archive_entry_symlink(e);
      out.push_back(name);
    }
  }
  archive_read_free(a);
  return out;
}

}  // namespace gpugeek::archive::testing
