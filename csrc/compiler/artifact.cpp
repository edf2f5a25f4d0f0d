#include "compiler/artifact.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_set>
#include <vector>

#include "runtime/cpu_features.h"

namespace torchneuron::compiler {
namespace {

std::string compiler_command() {
  const char* cxx = std::getenv("CXX");
  return cxx != nullptr && *cxx != '\0' ? cxx : "c++";
}

// `command`'s standard output, or "" when it cannot run.
std::string run_capture(const std::string& command) {
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    std::array<char, 256> buffer;
    while (fgets(buffer.data(), buffer.size(), pipe) != nullptr) output += buffer.data();
    pclose(pipe);
  }
  return output;
}

const std::string& compiler_identity() {
  static const std::string identity = run_capture(compiler_command() + " --version 2>/dev/null");
  return identity;
}

// 128-bit key from two FNV-1a passes with different offsets, as hex.
std::string hash_key(const std::string& text) {
  uint64_t a = 1469598103934665603ull, b = 1099511628211ull ^ 0x9e3779b97f4a7c15ull;
  for (unsigned char c : text) {
    a = (a ^ c) * 1099511628211ull;
    b = (b ^ c) * 0x100000001b3ull + 0x632be59bd9b4e019ull;
  }
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx", static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  return hex;
}

void make_directories(const std::string& path) {
  std::string partial;
  std::stringstream parts(path);
  for (std::string part; std::getline(parts, part, '/');) {
    partial += part + "/";
    if (part.empty()) continue;
    ::mkdir(partial.c_str(), 0755);
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw std::runtime_error("neuron compiler: cannot create the cache directory " + path +
                             "; set TORCHNEURON_CACHE_DIR to a writable directory");
  }
}

bool exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

// Marks an artifact as just used: eviction removes the least recently used first. A read-only
// cache (shared, or on a read-only mount) keeps its times.
void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

struct CacheFile {
  std::string path;
  int64_t bytes;
  int64_t mtime_ns;
};

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The process id in a builder's temporary name "<key>.<pid>.<ext>", or 0.
pid_t builder_pid(const std::string& name) {
  const size_t first = name.find('.'), last = name.rfind('.');
  if (first == std::string::npos || first == last) return 0;
  const std::string middle = name.substr(first + 1, last - first - 1);
  if (middle.empty() || middle.find_first_not_of("0123456789") != std::string::npos) return 0;
  return static_cast<pid_t>(std::strtol(middle.c_str(), nullptr, 10));
}

// Removes what failed or killed builds left behind: temporaries of processes that are gone, and
// lock files no builder holds (a builder removes its own when done).
void remove_leftovers(const std::string& dir, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (ends_with(name, ".lock")) {
      const int fd = ::open(path.c_str(), O_RDWR);
      if (fd < 0) continue;
      if (::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlink(path.c_str());
      ::close(fd);
    } else if (const pid_t pid = builder_pid(name); pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      ::unlink(path.c_str());
    }
  }
}

std::vector<std::string> directory_names(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* handle = ::opendir(dir.c_str())) {
    while (const dirent* entry = ::readdir(handle)) {
      if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
    }
    ::closedir(handle);
  }
  return names;
}

}  // namespace

bool is_artifact_entry(uintptr_t entry) {
  static std::mutex mutex;
  static auto* known = new std::unordered_set<uintptr_t>();  // artifacts are never unloaded
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (known->count(entry) != 0) return true;
  }
  // dladdr only looks the address up among the loaded objects' ranges; it reads nothing there.
  Dl_info info{};
  if (entry == 0 || ::dladdr(reinterpret_cast<void*>(entry), &info) == 0 || info.dli_fname == nullptr ||
      info.dli_saddr != reinterpret_cast<void*>(entry)) {
    return false;
  }
  std::string name = info.dli_fname;
  name = name.substr(name.rfind('/') + 1);
  const bool keyed = name.size() == 35 && ends_with(name, ".so") &&
                     name.find_first_not_of("0123456789abcdef") == 32;
  if (!keyed) return false;
  std::lock_guard<std::mutex> lock(mutex);
  known->insert(entry);
  return true;
}

int64_t cache_limit_bytes() {
  const char* value = std::getenv("TORCHNEURON_CACHE_MAX_MB");
  if (value != nullptr && *value != '\0') {
    char* end = nullptr;
    const long long megabytes = std::strtoll(value, &end, 10);
    if (*end == '\0' && megabytes >= 0) return static_cast<int64_t>(megabytes) << 20;
  }
  return int64_t{2048} << 20;
}

void trim_cache(const std::string& cache_dir, int64_t limit_bytes, const std::string& keep_key) {
  const std::vector<std::string> names = directory_names(cache_dir);
  remove_leftovers(cache_dir, names);
  // Artifacts (.so with the .cpp it was built from), oldest use first.
  std::vector<CacheFile> artifacts;
  int64_t total = 0;
  for (const std::string& name : directory_names(cache_dir)) {
    struct stat info;
    const std::string path = cache_dir + "/" + name;
    if (::stat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode)) continue;
    total += info.st_size;
    if (ends_with(name, ".so") && builder_pid(name) == 0 && name.rfind(keep_key, 0) != 0) {
      artifacts.push_back({path, info.st_size, info.st_mtim.tv_sec * 1000000000LL + info.st_mtim.tv_nsec});
    }
  }
  if (total <= limit_bytes) return;
  std::sort(artifacts.begin(), artifacts.end(),
            [](const CacheFile& a, const CacheFile& b) { return a.mtime_ns < b.mtime_ns; });
  // Down to 80% of the limit, so that the next few builds do not each trim again. A process that
  // loaded an artifact keeps it mapped after the file is removed.
  const int64_t target = limit_bytes / 5 * 4;
  for (const CacheFile& artifact : artifacts) {
    if (total <= target) break;
    const std::string source = artifact.path.substr(0, artifact.path.size() - 3) + ".cpp";
    struct stat info;
    if (::stat(source.c_str(), &info) == 0 && ::unlink(source.c_str()) == 0) total -= info.st_size;
    if (::unlink(artifact.path.c_str()) == 0) total -= artifact.bytes;
  }
}

// Generated code targets this machine at the process's instruction-set level (the kernel
// library's, lowered by TORCHNEURON_CPU_CAPABILITY) and tunes for it: the level is part of the
// flags and so of the cache key, and a shared cache never hands a machine code it cannot run.
std::string compile_flags() {
  const char* march = runtime::march_for_cpu_capability(runtime::selected_cpu_capability());
  return std::string("-std=c++20 -O3 -march=") + march +
         " -mtune=native -ffp-contract=off -fno-trapping-math -fno-math-errno -fopenmp-simd -shared -fPIC";
}

Artifact build_artifact(const std::string& source, const std::string& cache_dir) {
  const std::string key = hash_key(std::string(kCompilerVersion) + "\n" + compile_flags() + "\n" + compiler_identity() +
                                   "\n" + source);
  Artifact artifact;
  artifact.path = cache_dir + "/" + key + ".so";
  if (exists(artifact.path)) {
    touch(artifact.path);
    artifact.cache_hit = true;
    return artifact;
  }
  make_directories(cache_dir);
  // One builder per key across processes; the others wait and then find the result.
  const std::string lock_path = cache_dir + "/" + key + ".lock";
  const int lock = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (lock < 0) throw std::runtime_error("neuron compiler: cannot open the lock file " + lock_path);
  ::flock(lock, LOCK_EX);
  // Removed while held, when the build is done or failed: a process that opened it meanwhile
  // finds the artifact once it has the lock, or builds again (under its own temporary names).
  struct Unlock {
    int fd;
    std::string path;
    ~Unlock() {
      ::unlink(path.c_str());
      ::flock(fd, LOCK_UN);
      ::close(fd);
    }
  } unlock{lock, lock_path};
  if (exists(artifact.path)) {
    artifact.cache_hit = true;
    return artifact;
  }
  const auto start = std::chrono::steady_clock::now();
  const std::string stem = cache_dir + "/" + key + "." + std::to_string(::getpid());
  {
    std::ofstream file(stem + ".cpp");
    file << source;
    if (!file) throw std::runtime_error("neuron compiler: cannot write " + stem + ".cpp");
  }
  const std::string command = compiler_command() + " " + compile_flags() + " -o " + quoted(stem + ".so") + " " +
                              quoted(stem + ".cpp") + " > " + quoted(stem + ".log") + " 2>&1";
  const int status = std::system(command.c_str());
  // The temporaries go whatever happens; on success the artifact and its source were renamed.
  struct RemoveTemporaries {
    std::string stem;
    ~RemoveTemporaries() {
      for (const char* ext : {".cpp", ".so", ".log"}) std::remove((stem + ext).c_str());
    }
  } remove_temporaries{stem};
  if (status != 0) {
    std::ifstream log(stem + ".log");
    std::stringstream diagnostics;
    diagnostics << log.rdbuf();
    std::string text = diagnostics.str();
    if (text.size() > 2000) text = text.substr(0, 2000) + "...";
    throw std::runtime_error("neuron compiler: the system compiler failed (" + compiler_command() + ", exit status " +
                             std::to_string(status) + ") on generated code (key " + key + "):\n" + text);
  }
  if (std::rename((stem + ".so").c_str(), artifact.path.c_str()) != 0 ||
      std::rename((stem + ".cpp").c_str(), (cache_dir + "/" + key + ".cpp").c_str()) != 0) {
    throw std::runtime_error("neuron compiler: cannot move the artifact into " + artifact.path);
  }
  trim_cache(cache_dir, cache_limit_bytes(), key);
  artifact.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return artifact;
}

}  // namespace torchneuron::compiler
