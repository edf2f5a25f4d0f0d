// The executable artifact: generated C++ compiled by the system compiler into a shared object,
// cached on disk under a key of the source, the flags and the compiler, and safe when several
// processes build the same key at once (a lock file, then an atomic rename into place).
#pragma once

#include <string>

namespace torchneuron::compiler {

struct Artifact {
  std::string path;      // the shared object
  bool cache_hit = false;
  double seconds = 0.0;  // spent compiling (0 on a hit)
};

// Version of the code generator; part of every cache key.
constexpr const char* kCompilerVersion = "4";

// Builds (or finds) the shared object for `source` in `cache_dir`. Throws std::runtime_error
// with the compiler's diagnostics when the system compiler fails.
Artifact build_artifact(const std::string& source, const std::string& cache_dir);

// The flags generated code is compiled with.
std::string compile_flags();

}  // namespace torchneuron::compiler
