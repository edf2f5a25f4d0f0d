// The executable artifact: generated C++ compiled by the system compiler into a shared object,
// cached on disk under a key of the source, the flags and the compiler, and safe when several
// processes build the same key at once (a lock file, then an atomic rename into place).
#pragma once

#include <cstdint>
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

// The cache's size limit: TORCHNEURON_CACHE_MAX_MB (default 2048) in bytes.
int64_t cache_limit_bytes();

// Removes failed builds' leftovers, then, while the directory holds more than `limit_bytes`,
// the least recently used artifacts (never `keep_key`'s) down to 80% of it. build_artifact
// calls it after each build.
void trim_cache(const std::string& cache_dir, int64_t limit_bytes, const std::string& keep_key);

// Whether `entry` is the address of an exported function of a loaded artifact (a shared object
// named by its cache key). Launch ops take entry points as integers: anything else is an error
// for them to raise, never a call.
bool is_artifact_entry(uintptr_t entry);

// The flags generated code is compiled with.
std::string compile_flags();

}  // namespace torchneuron::compiler
