#include "compiler/artifact.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

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

}  // namespace

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
    artifact.cache_hit = true;
    return artifact;
  }
  make_directories(cache_dir);
  // One builder per key across processes; the others wait and then find the result.
  const std::string lock_path = cache_dir + "/" + key + ".lock";
  const int lock = ::open(lock_path.c_str(), O_CREAT | O_RDWR, 0644);
  if (lock < 0) throw std::runtime_error("neuron compiler: cannot open the lock file " + lock_path);
  ::flock(lock, LOCK_EX);
  struct Unlock {
    int fd;
    ~Unlock() {
      ::flock(fd, LOCK_UN);
      ::close(fd);
    }
  } unlock{lock};
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
  if (status != 0) {
    std::ifstream log(stem + ".log");
    std::stringstream diagnostics;
    diagnostics << log.rdbuf();
    std::string text = diagnostics.str();
    if (text.size() > 2000) text = text.substr(0, 2000) + "...";
    throw std::runtime_error("neuron compiler: the system compiler failed (" + compiler_command() + ", exit status " +
                             std::to_string(status) + ") on " + stem + ".cpp:\n" + text);
  }
  if (std::rename((stem + ".so").c_str(), artifact.path.c_str()) != 0 ||
      std::rename((stem + ".cpp").c_str(), (cache_dir + "/" + key + ".cpp").c_str()) != 0) {
    throw std::runtime_error("neuron compiler: cannot move the artifact into " + artifact.path);
  }
  std::remove((stem + ".log").c_str());
  artifact.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return artifact;
}

}  // namespace torchneuron::compiler
