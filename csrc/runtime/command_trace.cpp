#include "runtime/command_trace.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>

namespace torchneuron::runtime::command_trace {
namespace {

std::mutex records_mutex;
std::vector<CommandRecord>& records() {
  static auto* list = new std::vector<CommandRecord>();  // never destroyed: workers may outlive statics
  return *list;
}

thread_local std::vector<uint64_t> correlation_stack;

size_t initial_capacity() {
  const char* value = std::getenv("TORCHNEURON_PROFILER_MAX_COMMANDS");
  if (value != nullptr && *value != '\0') {
    char* end = nullptr;
    const unsigned long long parsed = std::strtoull(value, &end, 10);
    if (*end == '\0' && parsed > 0) return static_cast<size_t>(parsed);
  }
  return 500000;
}

size_t g_capacity = initial_capacity();  // under records_mutex
uint64_t g_dropped = 0;                  // under records_mutex

}  // namespace

std::atomic<bool> enabled_flag{false};

void set_enabled(bool enabled) {
  std::lock_guard<std::mutex> lock(records_mutex);
  if (enabled) {
    records().clear();
    g_dropped = 0;
  }
  enabled_flag.store(enabled, std::memory_order_release);
}

void push_correlation(uint64_t id) { correlation_stack.push_back(id); }

void pop_correlation() {
  if (!correlation_stack.empty()) correlation_stack.pop_back();
}

uint64_t current_correlation() { return correlation_stack.empty() ? 0 : correlation_stack.back(); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int32_t thread_id() {
  static thread_local const int32_t id = static_cast<int32_t>(::syscall(SYS_gettid));
  return id;
}

void record(const CommandRecord& record) {
  std::lock_guard<std::mutex> lock(records_mutex);
  if (records().size() >= g_capacity) {
    ++g_dropped;
    return;
  }
  records().push_back(record);
}

size_t capacity() {
  std::lock_guard<std::mutex> lock(records_mutex);
  return g_capacity;
}

void set_capacity(size_t records) {
  std::lock_guard<std::mutex> lock(records_mutex);
  g_capacity = records;
}

uint64_t dropped() {
  std::lock_guard<std::mutex> lock(records_mutex);
  return g_dropped;
}

std::vector<CommandRecord> take() {
  std::lock_guard<std::mutex> lock(records_mutex);
  std::vector<CommandRecord> out;
  out.swap(records());
  return out;
}

}  // namespace torchneuron::runtime::command_trace
