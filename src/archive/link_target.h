#pragma once
// Whether a symbolic link stays inside a tree, decided lexically (no file system access), as both the
// packer (a workdir's links) and the unpacker (an archive's links) must before following or writing one.

#include <string_view>

namespace gpugeek::archive {

// True when `target`, the text of a link that sits `depth` folders below the tree's root (0: a link in
// the root itself), names a path inside the tree: relative, without NUL, and never climbing above the
// root with "..". False for an absolute or empty target.
bool RelativeLinkStaysInside(int depth, std::string_view target);

}  // namespace gpugeek::archive
